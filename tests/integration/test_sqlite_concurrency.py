"""SQLite under several writer processes, threads, and kill -9 in the middle of writes.

Every check is exact: with EM credit a used item adds ``r + (1 - r) = 1`` of evidence to each of
its features and an ignored item adds 1 (no position discount), so a feature every shown item
carries holds exactly ``k x feedbacks`` of pos + neg. A lost or doubled update shows up there.
Both mechanics are pinned in ``workers.config()``, not taken from the defaults.
"""

from __future__ import annotations

import multiprocessing
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from heaprank import Reranker, SQLiteState
from tests.integration import sqlite_workers as workers

pytestmark = pytest.mark.slow


def _evidence(state: SQLiteState, namespace: str | None, feature: str) -> float:
    features, pos, neg = state.list_links(namespace)
    i = features.index(feature)
    return float(pos[i] + neg[i])


def _uses(state: SQLiteState, namespace: str) -> float:
    docs = state.read_docs(namespace, [c["id"] for c in workers.candidates()])
    return float(docs.use_count.sum())


def test_four_processes_share_one_file_without_losing_an_update(tmp_path):
    path = str(tmp_path / "shared.db")
    SQLiteState(path).close()  # create the schema once, before the race
    n_proc, n_each, k = 4, 250, 3
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=workers.feedback_loop, args=(path, w, n_each, k, "team"))
             for w in range(n_proc)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * n_proc

    total = n_proc * n_each
    with SQLiteState(path) as state:
        assert state.integrity_check() == "ok"
        stats = state.stats()
        assert stats["feedbacks"] == total
        assert stats["impressions"] == total
        assert _uses(state, "team") == total
        assert _evidence(state, "team", workers.COMMON) == pytest.approx(total * k, abs=1e-6)
        assert _evidence(state, None, workers.COMMON) == pytest.approx(total * k, abs=1e-6)
        crossed = "qt:when&" + workers.COMMON
        assert _evidence(state, None, crossed) == pytest.approx(total * k, abs=1e-6)


def test_threads_share_one_connection(tmp_path):
    state = SQLiteState(tmp_path / "threads.db")
    rr = Reranker(state, config=workers.config())
    errors: list[BaseException] = []
    n_threads, n_each, k = 4, 50, 2

    def run(worker: int) -> None:
        try:
            for i in range(n_each):
                ranking = rr.rerank(workers.QUERY, workers.candidates(), namespace="t", k=k,
                                    now=workers.NOW + worker * 1000 + i)
                rr.feedback(ranking.recall_id, used=ranking.ids[:1])
        except BaseException as exc:  # noqa: B036 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    total = n_threads * n_each
    assert state.stats()["feedbacks"] == total
    assert _evidence(state, "t", workers.COMMON) == pytest.approx(total * k, abs=1e-6)
    state.close()


def test_kill_9_mid_write_never_corrupts_or_half_applies(tmp_path):
    path = tmp_path / "crash.db"
    SQLiteState(path).close()
    k = 3
    rng = random.Random(20240229)
    script = Path(workers.__file__)
    committed = 0
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, str(script), str(path), str(k)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            assert line.strip() == "ready", proc.stderr.read()
            time.sleep(rng.uniform(0.05, 0.4))
        finally:
            proc.kill()  # SIGKILL: no cleanup, no rollback, the OS just stops it
            proc.wait(timeout=30)
            proc.stdout.close()
            proc.stderr.close()
        assert proc.returncode == -9
        with SQLiteState(path) as state:
            assert state.integrity_check() == "ok"
            feedbacks = state.stats()["feedbacks"]
            assert feedbacks >= committed  # nothing committed was lost
            committed = feedbacks
            assert _uses(state, "crash") == feedbacks
            assert _evidence(state, "crash", workers.COMMON) == pytest.approx(feedbacks * k,
                                                                             abs=1e-6)
            assert _evidence(state, None, workers.COMMON) == pytest.approx(feedbacks * k,
                                                                          abs=1e-6)
    assert committed > 0  # the writers did get work done between kills
