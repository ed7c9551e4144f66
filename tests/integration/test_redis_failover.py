"""A Redis Cluster failover: 3 masters + 3 replicas started by this test, a master killed with
``kill -9`` while feedback streams in, its replica promoted. Nothing is half-applied, retries do
not double count, and the feedbacks the dead master had acknowledged but not yet replicated
(Redis replicates asynchronously) are found by their missing verdicts and re-sent safely."""

from __future__ import annotations

import threading
import time

import pytest

from heaprank.state.redis import RedisState
from tests.integration import redis_workers as workers
from tests.integration.redis_servers import (
    have_binaries,
    redis_cli,
    start_cluster,
    unavailable,
    unique_prefix,
)

pytestmark = pytest.mark.slow
#: How long a promotion may take: the node timeout (2 s) plus an election, on a loaded machine.
PROMOTION_LIMIT_S = 30.0


@pytest.fixture()
def replicated_cluster(tmp_path):
    if not have_binaries():
        unavailable("redis-server / redis-cli are not installed")
    nodes = start_cluster(tmp_path / "cluster", masters=3, replicas=1)
    yield nodes
    for node in nodes:
        node.stop(hard=True)


def test_a_master_killed_mid_stream_fails_over_with_nothing_half_applied(replicated_cluster):
    import redis

    masters, replicas = replicated_cluster[:3], replicated_cluster[3:]
    prefix = unique_prefix()
    plan = list(workers.plan(7, 300, int(time.time() * 1000)))
    # The victim: the master of the namespace most of the plan writes to; the client starts
    # from another master.
    busiest = max(workers.NAMESPACES, key=lambda ns: sum(imp.namespace == ns for imp, _ in plan))
    probe = RedisState(f"redis+cluster://127.0.0.1:{masters[0].port}", prefix=prefix)
    node = probe.client.get_node_from_key(probe.layout.ns_key("l", busiest))
    probe.close()
    victim = next(m for m in masters if m.port == node.port)
    survivor = next(m for m in masters if m is not victim)
    heir = next(r for r in replicas
                if f"master_port:{victim.port}" in redis_cli(r.port, "info", "replication"))

    state = RedisState(f"redis+cluster://127.0.0.1:{survivor.port}", prefix=prefix,
                       timeout_s=0.5, retries=2)
    acked: list = []
    failures: list[str] = []
    writer = threading.Thread(target=workers.feed_until_applied,
                              args=(state, plan, acked, failures, 2000))
    writer.start()
    try:
        while len(acked) < 100 and writer.is_alive():
            time.sleep(0.005)
        victim.stop(hard=True)
        killed = time.monotonic()
        while time.monotonic() - killed < PROMOTION_LIMIT_S:
            if "role:master" in redis_cli(heir.port, "info", "replication") and \
                    "cluster_state:ok" in redis_cli(survivor.port, "cluster", "info"):
                break
            time.sleep(0.05)
        promoted_s = time.monotonic() - killed
    finally:
        writer.join(timeout=180)
    assert not writer.is_alive() and len(acked) == len(plan)
    assert promoted_s < PROMOTION_LIMIT_S, "the replica was not promoted"
    assert failures  # the writer did run into the failover
    print(f"replica promoted {promoted_s:.1f} s after the kill; {len(failures)} failed calls retried")

    # No feedback is half-applied: an impression has all its verdicts or none, and the counts
    # are exactly those of the feedbacks whose verdicts are there (none doubled by a retry).
    applied, lost = [], []
    for imp, batch in plan:
        stored = state.get_impression(imp.recall_id)
        verdicts = set(stored.verdicts) if stored is not None and stored.verdicts else {0}
        assert verdicts == {0} or 0 not in verdicts, f"half-applied feedback {imp.recall_id}"
        (lost if verdicts == {0} else applied).append((imp, batch))
    assert workers.snapshot(state) == workers.serial_snapshot(applied)
    # Acknowledged but lost with the master (asynchronous replication): found by their missing
    # verdicts, re-sent, counted once.
    print(f"{len(lost)} acknowledged feedbacks were lost with the master and re-sent")
    workers.feed_until_applied(state, lost, [], failures)
    assert workers.snapshot(state) == workers.serial_snapshot(plan)
    assert state.stats()["feedbacks"] == len(plan)
    assert isinstance(state.client, redis.cluster.RedisCluster)
    state.close()
