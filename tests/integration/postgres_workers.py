"""Code run in child processes by the PostgreSQL concurrency and crash tests (importable by
spawn, runnable as a script for the crash test)."""

from __future__ import annotations

import sys

from tests.integration.sqlite_workers import COMMON, NOW, QUERY, candidates, config

__all__ = ["COMMON", "feedback_loop", "explicit_writer"]


def feedback_loop(url: str, worker: int, n: int, k: int) -> None:
    """``n`` reranks, each followed by feedback using one shown item, in namespace
    ``team<worker % 2>``: the same plan whether run by one process or by many."""
    from heaprank import Reranker

    with Reranker(url, config=config()) as rr:
        cands = candidates()
        namespace = f"team{worker % 2}"
        for i in range(n):
            ranking = rr.rerank(QUERY, cands, namespace=namespace, k=k,
                                now=NOW + worker * 100_000 + i)
            out = rr.feedback(ranking.recall_id, used=[ranking.ids[i % k]], namespace=namespace)
            if len(out.applied) != k:
                raise SystemExit(f"worker {worker}: feedback {i} applied {out.applied}")


def explicit_writer(url: str, schema: str, writer: int, n: int, k: int) -> None:
    """The writer's whole plan of ``n`` explicit feedbacks (ids ``w<writer>-<i>``), from the
    first: those a killed run applied come back as already recorded. Prints ``ready`` once the
    state is open, the index of each feedback once it returned, and ``done`` at the end."""
    from heaprank import Reranker
    from heaprank.state.postgres import PostgresState

    rr = Reranker(PostgresState(url, schema=schema), config=config())
    cands = candidates(k)
    print("ready", flush=True)
    for i in range(n):
        shown = cands[i % k:] + cands[:i % k]
        rr.feedback(namespace=f"crash{writer}", query=QUERY, shown=shown, used=[shown[0]["id"]],
                    now=NOW + i, feedback_id=f"w{writer}-{i}")
        print(i, flush=True)
    rr.close()
    print("done", flush=True)


if __name__ == "__main__":
    explicit_writer(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                    int(sys.argv[5]))
