"""Code run in child processes by the SQLite concurrency and crash tests (importable by spawn)."""

from __future__ import annotations

import sys

NOW = 1_750_000_000.0
QUERY = "When is the team meeting?"
COMMON = "kind:fact"  # every candidate below has it, so every shown item adds 1.0 of evidence


def config():
    """The credit mechanics the exact counts rely on, pinned rather than taken from defaults:
    EM credit (a used item adds ``r + (1 - r) = 1`` to each of its features) and no position
    discount (an ignored item adds exactly 1)."""
    from heaprank import Config, Learning

    return Config(learning=Learning(em_credit=True, reject_discount="none"))


def candidates(n: int = 6) -> list[dict]:
    return [{"id": f"doc{i}", "text": f"Team meeting note {i} on Monday",
             "score": float(n - i), "metadata": {"kind": "fact"}} for i in range(n)]


def feedback_loop(path: str, worker: int, n: int, k: int, namespace: str) -> None:
    """``n`` reranks, each followed by feedback using one shown item: all in this process."""
    from heaprank import Reranker, SQLiteState

    with SQLiteState(path) as state:
        rr = Reranker(state, config=config())
        cands = candidates()
        for i in range(n):
            ranking = rr.rerank(QUERY, cands, namespace=namespace, k=k,
                                now=NOW + worker * 100_000 + i)
            out = rr.feedback(ranking.recall_id, used=[ranking.ids[i % k]], namespace=namespace)
            if len(out.applied) != k:
                raise SystemExit(f"worker {worker}: feedback {i} applied {out.applied}")


def crash_writer(path: str, k: int) -> None:
    """Feedback in a tight loop until killed; prints ``ready`` once the state is open."""
    from heaprank import Reranker, SQLiteState

    rr = Reranker(SQLiteState(path), config=config())
    cands = candidates()
    print("ready", flush=True)
    i = 0
    while True:
        ranking = rr.rerank(QUERY, cands, namespace="crash", k=k, now=NOW + i)
        rr.feedback(ranking.recall_id, used=[ranking.ids[0]])
        i += 1


if __name__ == "__main__":
    crash_writer(sys.argv[1], int(sys.argv[2]))
