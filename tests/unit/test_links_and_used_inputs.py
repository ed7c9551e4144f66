"""Two inputs the core must answer without leaking or misreading: ``links()`` of a namespace
the state never held (it reads as any new namespace: the pooled prior, never "this tenant does
not exist"), and ``used`` given as one bare string (iterated, ``"ab"`` would be the ids ``"a"``
and ``"b"``)."""

from __future__ import annotations

import pytest

from heaprank import InputTypeError, Reranker

CANDIDATES = [{"id": "a", "text": "Booked the flight, departs March 14"},
              {"id": "b", "text": "Flights to Lisbon cost $400-700"}]


def _view(links: list) -> list[tuple]:
    return [(link.feature, link.p, link.n) for link in links]


def test_links_of_a_namespace_never_held_reads_as_any_new_namespace() -> None:
    rr = Reranker()
    ranking = rr.rerank("When is my flight?", CANDIDATES, namespace="user:maya")
    rr.feedback(ranking.recall_id, used=["a"])
    assert rr.links("user:maya")  # a namespace with feedback lists its links
    # a namespace nobody used and one that was used then forgotten look the same: the prior
    rr.forget_namespace("user:maya")
    assert _view(rr.links("never")) == _view(rr.links("user:maya"))


def test_used_as_a_bare_string_is_rejected_naming_used() -> None:
    rr = Reranker()
    ranking = rr.rerank("When is my flight?", CANDIDATES)
    with pytest.raises(InputTypeError, match="used"):
        rr.feedback(ranking.recall_id, used="a")  # type: ignore[arg-type]
    assert rr.stats()["feedbacks"] == 0  # nothing was written


def test_used_as_a_bare_string_is_rejected_by_afeedback_too() -> None:
    import asyncio

    rr = Reranker()
    ranking = rr.rerank("When is my flight?", CANDIDATES)
    with pytest.raises(InputTypeError, match="used"):
        asyncio.run(rr.afeedback(ranking.recall_id, used="a"))  # type: ignore[arg-type]
