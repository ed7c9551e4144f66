"""Redis under 8 writer processes x 500 feedbacks, on overlapping namespaces and features: the
final evidence equals the same feedbacks applied serially, exactly (see ``redis_workers``)."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from heaprank import MemoryState
from heaprank.state.redis import RedisState
from tests.integration import redis_workers as workers
from tests.integration.redis_servers import unique_prefix

pytestmark = pytest.mark.slow

PROCESSES, FEEDBACKS = 8, 500


def _snapshot(state) -> dict:
    out = {None: state.list_links(None)}
    for ns in state.namespaces():
        out[ns] = state.list_links(ns)
    return {k: (f, p.tolist(), n.tolist()) for k, (f, p, n) in out.items()}


@pytest.mark.parametrize("kind", ["redis", "redis-cluster", "redis-16-digit-ids"])
def test_concurrent_feedback_equals_the_serial_result(kind, request):
    """Impressions in the hour hashes (recall ids minted with their bucket) and, on one server,
    in a key each (16-digit ids, as written before them)."""
    minted = kind != "redis-16-digit-ids"
    url = request.getfixturevalue("redis_cluster_url" if kind == "redis-cluster" else "redis_url")
    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    ctx = multiprocessing.get_context("spawn")
    state = RedisState(url, prefix=prefix)
    try:
        with ctx.Manager() as manager, ctx.Pool(PROCESSES) as pool:
            gate = manager.Barrier(PROCESSES)  # on 2 busy cores, spawning 8 can take seconds
            results = pool.starmap(workers.run_worker, [
                (url, prefix, w, FEEDBACKS, born_ms, 10, gate, minted) for w in range(PROCESSES)])
        # The writers really overlapped: every one started before every other one finished.
        assert max(r[2] for r in results) < min(r[3] for r in results)
        serial = MemoryState()
        expected_items = sum(workers.apply(serial, w, FEEDBACKS, born_ms, minted=minted)[0]
                             for w in range(PROCESSES))
        assert sum(r[0] for r in results) == expected_items == PROCESSES * FEEDBACKS * 3
        assert sum(r[1] for r in results) == PROCESSES * (FEEDBACKS // 10) * 3  # retries: no-ops
        got, want = _snapshot(state), _snapshot(serial)
        assert got == want  # exact: not one increment lost or doubled
        assert state.stats()["feedbacks"] == serial.stats()["feedbacks"] == PROCESSES * FEEDBACKS
        assert state.stats()["documents"] == serial.stats()["documents"]
    finally:
        state.clear()
        state.close()
