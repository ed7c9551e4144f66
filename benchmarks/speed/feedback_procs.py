"""Feedback throughput of SQLite from several processes at once, single or grouped commits.

Each process opens the same file, makes its own recalls first (untimed), waits at a barrier,
then gives its feedbacks: one transaction each (``feedback``), or ``group`` per transaction
(``feedback_many``). Throughput = all feedbacks / wall time from the barrier to the last finish.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

T0 = 1_780_000_000.0
K = 10
#: The configurations measured, ``(synchronous, processes, feedbacks per transaction)``.
PLAN = (("FULL", 1, 1), ("NORMAL", 1, 1), ("NORMAL", 4, 1), ("NORMAL", 4, 16), ("FULL", 4, 16))


def _candidates(worker: int) -> list[dict[str, Any]]:
    kinds = ("fact", "episode", "note", "tool_result")
    return [{"id": f"w{worker}-m{i}", "text": f"Note {i} about the flight on Monday at {i}:00",
             "score": float(50 - i), "metadata": {"kind": kinds[i % 4], "created_at": T0 - i * 3600}}
            for i in range(50)]


def _worker(path: str, synchronous: str, worker: int, n: int, group: int,
            barrier: Any, out: Any) -> None:
    from heaprank import Config, Refit, Reranker, SQLiteState

    rr = Reranker(SQLiteState(path, synchronous=synchronous), config=Config(refit=Refit(every=0)))
    cands = _candidates(worker)
    recalls = []
    for i in range(n):
        ranking = rr.rerank("When is the flight?", cands, namespace=f"user{worker % 3}", k=K,
                            now=T0)
        recalls.append((ranking.recall_id, [ranking.ids[i % K]]))
    barrier.wait()
    t0 = time.perf_counter()
    if group <= 1:
        for recall_id, used in recalls:
            rr.feedback(recall_id, used=used)
    else:
        for start in range(0, n, group):
            rr.feedback_many(recalls[start:start + group])
    out.put((t0, time.perf_counter()))
    rr.close()


def measure(tmp: str, synchronous: str, processes: int, per_process: int,
            group: int) -> dict[str, Any]:
    """Feedbacks per second with ``processes`` writers on one fresh file."""
    from heaprank import SQLiteState

    path = str(Path(tmp) / f"procs-{synchronous}-{processes}-{group}.db")
    SQLiteState(path).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, synchronous, w, per_process, group,
                                               barrier, out)) for w in range(processes)]
    for p in procs:
        p.start()
    spans = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    total = processes * per_process
    return {"synchronous": synchronous, "processes": processes, "group": group,
            "feedbacks": total, "wall_s": wall, "per_s": total / wall}
