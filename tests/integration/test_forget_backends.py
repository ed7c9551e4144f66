"""The forget preview reads the documents each backend knows alike (memory, SQLite in a real file,
Redis on the shared server), sees only the namespace asked about, and changes nothing."""

from __future__ import annotations

from heaprank import Reranker
from heaprank.model.retention import RetentionPolicy

DAY = 86_400.0
NOW = 1_750_000_000.0


def test_every_backend_reports_the_same_forgotten_documents(state):
    rr = Reranker(state)
    for namespace, doc, idle, uses in (("a", "a-old", 200, 1), ("a", "a-used", 200, 30),
                                       ("a", "a-new", 3, 1), ("b", "b-old", 900, 1)):
        for _ in range(uses):
            ranking = rr.rerank("q", [{"id": doc, "text": "a note", "score": 1.0}],
                                namespace=namespace, now=NOW - idle * DAY)
            rr.feedback(ranking.recall_id, used=[doc])
    before = rr.stats()
    report = rr.forget_candidates("a", now=NOW)
    assert (report.ids, report.checked) == (("a-old",), 3)
    assert rr.forget_candidates("b", now=NOW).ids == ("b-old",)
    everything = rr.forget_candidates("a", now=NOW, policy=RetentionPolicy(half_life_days=0.5))
    assert set(everything.ids) == {"a-old", "a-used", "a-new"}  # never a document of "b"
    assert rr.stats() == before
