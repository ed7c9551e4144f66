"""PostgreSQL under 8 writer processes and under kill -9 of its writers.

Every check is exact: with EM credit a used item adds ``r + (1 - r) = 1`` of evidence to each
of its features and an ignored item adds 1 (no position discount), so a feature every shown
item carries holds exactly ``k x feedbacks`` of pos + neg, whatever order the feedbacks came
in. A lost or doubled update shows up there, in the feedback count and in the documents' uses.
"""

from __future__ import annotations

import multiprocessing
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from heaprank.state.postgres import PostgresState
from tests.integration import postgres_workers as workers
from tests.postgres_server import drop_schema, state_url, unique_schema

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _evidence(state: PostgresState, namespace: str | None) -> dict[str, float]:
    features, pos, neg = state.list_links(namespace)
    return dict(zip(features, (pos + neg).tolist()))


def _uses(state: PostgresState, namespace: str, ids: list[str]) -> float:
    return float(state.read_docs(namespace, ids).use_count.sum())


def _run(url: str, plans: list[tuple[int, int]], k: int) -> None:
    """Each ``(worker, n)`` plan in a process of its own, all at once."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=workers.feedback_loop, args=(url, w, n, k)) for w, n in plans]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * len(procs)


def test_eight_processes_give_the_counts_of_the_serial_run(postgres_url):
    n_proc, n_each, k = 8, 30, 3
    parallel, serial = unique_schema(), unique_schema()
    try:
        started = time.perf_counter()
        _run(state_url(postgres_url, parallel), [(w, n_each) for w in range(n_proc)], k)
        took = time.perf_counter() - started
        for w in range(n_proc):  # the same plans, one after the other, in this process
            workers.feedback_loop(state_url(postgres_url, serial), w, n_each, k)
        total = n_proc * n_each
        ids = [c["id"] for c in workers.candidates()]
        with PostgresState(postgres_url, schema=parallel) as shared, \
                PostgresState(postgres_url, schema=serial) as alone:
            assert shared.stats() == alone.stats()
            assert shared.stats()["feedbacks"] == total
            for ns in (None, "team0", "team1"):
                got, want = _evidence(shared, ns), _evidence(alone, ns)
                assert got.keys() == want.keys()
                assert got == pytest.approx(want, abs=1e-6)
            assert _evidence(shared, None)[workers.COMMON] == pytest.approx(total * k, abs=1e-6)
            for ns in ("team0", "team1"):
                assert _uses(shared, ns, ids) == _uses(alone, ns, ids) == total / 2
        print(f"\n8 processes x {n_each} rerank+feedback: {total / took:.0f} feedback/s "
              f"(spawn included)")
    finally:
        drop_schema(postgres_url, parallel)
        drop_schema(postgres_url, serial)


def _writer(url: str, schema: str, writer: int, n: int, k: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.integration.postgres_workers", url,
                             schema, str(writer), str(n), str(k)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_after(proc: subprocess.Popen[str], lines: int, rng: random.Random) -> bool:
    """SIGKILL ``proc`` a few milliseconds after it reported ``lines`` more feedbacks: no
    cleanup, no rollback, the OS just stops it, mid-write or not. Whether it had finished its
    plan first (printed ``done``)."""
    for _ in range(lines):
        line = proc.stdout.readline().strip()
        if line in ("done", ""):
            return line == "done"
    time.sleep(rng.uniform(0.0, 0.03))
    proc.kill()
    return False


def test_kill_9_of_writers_loses_and_doubles_nothing(postgres_url, postgres_schema):
    """Two writers give explicit feedback (ids of their own) and are killed with SIGKILL at
    random moments, ten times; each restart retries its whole plan from the first feedback.
    After every kill the state is consistent (no half-applied feedback); at the end each
    feedback is counted exactly once."""
    n, k, writers = 100, 3, (0, 1)
    rng = random.Random(20261207)
    PostgresState(postgres_url, schema=postgres_schema).close()  # the schema, before the race
    committed, kills = 0, 0
    ids = [c["id"] for c in workers.candidates(k)]
    finished: set[int] = set()
    for round_ in range(12):
        procs = {w: _writer(postgres_url, postgres_schema, w, n, k) for w in writers
                 if w not in finished}
        try:
            for proc in procs.values():
                line = proc.stdout.readline()
                assert line.strip() == "ready", proc.stderr.read()
            done = {w: round_ < 10 and _kill_after(  # a few new feedbacks past the retried ones
                proc, committed // len(writers) + rng.randrange(2, 12), rng)
                for w, proc in procs.items()}
            for w, proc in procs.items():
                # (read through the same buffered pipe the lines above came from: communicate()
                # reads the raw pipe and would miss what that buffer holds already)
                out, err = proc.stdout.read(), proc.stderr.read()
                proc.wait(timeout=300)
                if proc.returncode == -9:
                    kills += 1
                else:
                    assert proc.returncode == 0 and (done[w] or "done" in out), err
                    finished.add(w)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
                proc.stderr.close()
        with PostgresState(postgres_url, schema=postgres_schema) as state:
            feedbacks = state.stats()["feedbacks"]
            assert feedbacks >= committed  # nothing committed was lost
            committed = feedbacks
            counted = sum(_uses(state, f"crash{w}", ids) for w in writers)
            assert counted == feedbacks  # no feedback half-applied
            assert _evidence(state, None).get(workers.COMMON, 0.0) == pytest.approx(
                feedbacks * k, abs=1e-6)
        if finished == set(writers):
            break
    # Ten kill rounds of two writers: a writer that the lead reaches after it finished its
    # plan is not killed (under load, a few), so the count asked for is a floor, not 20.
    assert finished == set(writers) and kills >= 8
    with PostgresState(postgres_url, schema=postgres_schema) as state:
        assert state.stats()["feedbacks"] == len(writers) * n  # each exactly once
        for w in writers:
            assert _uses(state, f"crash{w}", ids) == n
            assert _evidence(state, f"crash{w}")[workers.COMMON] == pytest.approx(n * k, abs=1e-6)
    print(f"\nkill -9: {kills} writers killed, {len(writers) * n} feedbacks each counted once")
