"""The Cluster's pooled outbox: a feedback's pooled deltas wait in its bucket's outbox (written
by the same script as the namespace's counts) until pushed; a push applied twice counts once,
and a writer killed before its push loses nothing: the next drain pushes its entries."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import time
from typing import Any

from heaprank import MemoryState
from heaprank.state.redis import RedisState, pooled
from tests.integration import redis_workers as workers
from tests.integration.redis_servers import unique_prefix


def _apply_then_die(url: str, prefix: str, count: int, born_ms: int) -> None:
    """Apply feedbacks and die (SIGKILL) with their pooled deltas not pushed."""
    state = RedisState(url, prefix=prefix)
    workers.apply(state, 0, count, born_ms)
    assert state.outbox  # deltas waiting: the batch is not full
    os.kill(os.getpid(), signal.SIGKILL)


def _holding(url: str, prefix: str, monkeypatch) -> RedisState:
    """A Cluster state that keeps its outbox entries until told to push: no batch size or age
    pushes them, nor a prune on its first feedback."""
    from heaprank.state.redis import connect

    monkeypatch.setattr(connect, "PUSH_EVERY", 1_000)
    monkeypatch.setattr(connect, "PUSH_AFTER_S", 1e9)
    state = RedisState(url, prefix=prefix)
    state._feedbacks = itertools.count(2)  # no prune (which pushes) on the first feedback
    return state


def test_a_writer_killed_before_its_push_loses_nothing(redis_cluster_url, monkeypatch):
    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_apply_then_die, args=(redis_cluster_url, prefix, 10, born_ms))
    from heaprank.state.redis import connect
    monkeypatch.setattr(connect, "PUSH_EVERY", 1_000)
    monkeypatch.setattr(connect, "PUSH_AFTER_S", 1e9)
    proc.start()
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL
    time.sleep(2.1)  # a drain leaves entries younger than 2 s to their writer
    state = RedisState(redis_cluster_url, prefix=prefix)
    try:
        serial = MemoryState()
        workers.apply(serial, 0, 10, born_ms)
        assert workers.snapshot(state) == workers.snapshot(serial)  # drained by list_links
        assert state.stats()["feedbacks"] == 10
    finally:
        state.clear()
        state.close()


def test_an_entry_pushed_twice_counts_once(redis_cluster_url, monkeypatch):
    born_ms = int(time.time() * 1000)
    state = _holding(redis_cluster_url, unique_prefix(), monkeypatch)
    try:
        workers.apply(state, 1, 5, born_ms)
        entries = state.take_outbox()
        assert entries
        # Pushed, then pushed again before the pusher removed the markers (a retry after a lost
        # reply, or a drain after the pusher died between the two).
        state._run("push", lambda: pooled.push(state.layout, entries), idempotent=True)
        state._run("push again", lambda: pooled.push(state.layout, entries), idempotent=True)
        serial = MemoryState()
        workers.apply(serial, 1, 5, born_ms)
        assert workers.snapshot(state) == workers.snapshot(serial)
    finally:
        state.clear()
        state.close()


def test_a_retry_after_a_lost_reply_hands_its_writer_the_waiting_entry(redis_cluster_url,
                                                                        monkeypatch):
    """The FEEDBACK script ran but its reply was lost (the entry never reached the writer's
    batch): the retry finds the items recorded, reports it stale, and queues the entry the
    first run left in the outbox, so the writer's next push (not only a drain) applies it."""
    from heaprank.state.redis import ops

    born_ms = int(time.time() * 1000)
    state = _holding(redis_cluster_url, unique_prefix(), monkeypatch)
    try:
        (imp, update), = workers.plan(4, 1, born_ms)
        state.put_impression(imp)
        applied, entry = state._run("feedback", lambda: ops.apply_update(
            state.layout, True, update, state.cache, state.seen), idempotent=True)
        assert applied and entry is not None and not state.outbox  # the reply "lost"
        assert state.apply([update]) == [False]
        assert [e.id for e in state.outbox] == [entry.id]
        assert state.apply([update]) == [False]  # queued once, however often retried
        assert len(state.outbox) == 1
        state.push()
        assert not state.client.hgetall(entry.outbox)  # pushed by its writer: no drain needed
        assert workers.snapshot(state) == workers.serial_snapshot([(imp, update)])
    finally:
        state.clear()
        state.close()


def test_entries_pushed_out_of_order_lose_nothing(redis_cluster_url, monkeypatch):
    """A namespace's second feedback pushed before its first (two writers' batches): the shard
    keeps the second's deltas until the first brings the namespace's count."""
    born_ms = int(time.time() * 1000)
    state = _holding(redis_cluster_url, unique_prefix(), monkeypatch)
    try:
        pairs = list(workers.plan(3, 30, born_ms))
        for imp, update in pairs:
            state.put_impression(imp)
            assert state.apply([update]) == [True]
        entries = state.take_outbox()
        assert len(entries) >= 2
        for entry in reversed(entries):  # newest first
            state._run("push", lambda e=entry: pooled.push(state.layout, [e]), idempotent=True)
        assert workers.snapshot(state) == workers.serial_snapshot(pairs)
    finally:
        state.clear()
        state.close()


def test_a_writer_pushing_after_a_drain_took_its_entries_counts_once(redis_cluster_url, monkeypatch):
    """A writer keeps its entries for its next push; meanwhile another process's drain pushes
    them from the outboxes (and removes their markers). The writer's push then applies
    nothing: the shards' watermark says those entries were applied already."""
    from heaprank.state.redis import admin

    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    writer = _holding(redis_cluster_url, prefix, monkeypatch)
    drainer = RedisState(redis_cluster_url, prefix=prefix)
    try:
        workers.apply(writer, 2, 5, born_ms)
        assert writer.outbox
        monkeypatch.setattr(pooled, "CLOCK_SKEW_MS", 0.0)  # (so the test need not wait)
        admin.drain(drainer, 0.0)  # a full drain: pushes them
        time.sleep(0.05)
        admin.drain(drainer, 0.0)  # none waits now: the watermark passes them, markers go
        markers = drainer.client.zrange(drainer.layout.markers[0], 0, -1)
        assert markers == [b""]  # (the watermark alone)
        writer.push()  # the writer's copies, read before the drain
        serial = MemoryState()
        workers.apply(serial, 2, 5, born_ms)
        assert workers.snapshot(drainer) == workers.snapshot(serial)
    finally:
        drainer.clear()
        drainer.close()
        writer.close()


def _feed_until_killed(url: str, prefix: str, worker: int, count: int, born_ms: int,
                       gate: Any) -> None:
    """A writer that applies its plan (no retries) and never closes: the test kills it."""
    state = RedisState(url, prefix=prefix)
    gate.wait(timeout=120)
    workers.apply(state, worker, count, born_ms)
    time.sleep(60)  # (killed before this ends, its batch never pushed)


def _pooled_and_summed(state: RedisState) -> tuple[dict, dict]:
    """The pooled layer's counts, and the sum over every namespace of its own counts."""
    names, pos, neg = state.list_links(None)
    pooled_counts = {f: (p, n) for f, p, n in zip(names, pos.tolist(), neg.tolist())}
    summed: dict[str, tuple[float, float]] = {}
    for ns in state.namespaces():
        for f, p, n in zip(*(x if isinstance(x, list) else x.tolist()
                             for x in state.list_links(ns))):
            if not f.startswith("doc:"):
                q = summed.get(f, (0.0, 0.0))
                summed[f] = (q[0] + p, q[1] + n)
    return pooled_counts, summed


def test_writers_killed_mid_run_lose_no_pooled_learning_after_one_drain(redis_cluster_url):
    """8 writers killed with SIGKILL while writing (no close(), no feedback retried): one
    drain() by another process brings the pooled layer to the exact sum of what the
    namespaces recorded (before: 3-4% short, the killed writers' batches)."""
    prefix = unique_prefix()
    born_ms = int(time.time() * 1000)
    ctx = multiprocessing.get_context("fork")
    gate = ctx.Barrier(8)
    procs = [ctx.Process(target=_feed_until_killed,
                         args=(redis_cluster_url, prefix, w, 150, born_ms, gate))
             for w in range(8)]
    for proc in procs:
        proc.start()
    state = RedisState(redis_cluster_url, prefix=prefix)
    try:
        deadline = time.monotonic() + 120
        while state.stats()["feedbacks"] < 400 and time.monotonic() < deadline:
            time.sleep(0.05)
        for proc in procs:  # mid-run: part-way through their plans, batches unpushed
            os.kill(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.join(30)
            assert proc.exitcode == -signal.SIGKILL
        recorded = state.stats()["feedbacks"]
        assert 400 <= recorded < 8 * 150
        state.drain()
        pooled_counts, summed = _pooled_and_summed(state)
        total = sum(p + n for p, n in pooled_counts.values())
        truth = sum(p + n for p, n in summed.values())
        print(f"feedbacks recorded {recorded}; pooled total {total} vs namespaces' sum {truth}")
        assert pooled_counts == summed
    finally:
        state.clear()
        state.close()
