"""Forgetting a namespace takes its feedbacks out of ``stats()['feedbacks']`` on every backend
(memory, SQLite in a real file, Redis on the shared server): what a forgotten tenant did is not
counted any more, while the other tenants' feedbacks stay counted."""

from __future__ import annotations

from heaprank import Reranker


def _feedbacks(rr: Reranker, namespace: str, n: int) -> None:
    for j in range(n):
        ranking = rr.rerank("q", [{"id": f"{namespace}-{j}", "text": "a note", "score": 1.0}],
                            namespace=namespace)
        rr.feedback(ranking.recall_id, used=[f"{namespace}-{j}"])


def test_forgetting_a_namespace_drops_its_feedbacks_from_the_count(state):
    rr = Reranker(state)
    _feedbacks(rr, "gone", 3)
    _feedbacks(rr, "kept", 2)
    assert rr.stats()["feedbacks"] == 5
    rr.forget_namespace("gone")
    assert rr.stats()["feedbacks"] == 2
    _feedbacks(rr, "gone", 1)  # the name used again starts from nothing
    assert rr.stats()["feedbacks"] == 3
    rr.forget_namespace("gone")
    rr.forget_namespace("kept")
    assert rr.stats()["feedbacks"] == 0
