"""Graded feedback, ``feedback(labels={id: "used" | "ignored" | "outdated" | "wrong"})``, on every
real backend (memory, a SQLite file, the Redis server of HEAPRANK_REDIS_URL): what each label
teaches the links, that it is stored and idempotent, forgotten with its namespace, counted in
the tuning log, and refused with the field named."""

from __future__ import annotations

import asyncio
import math

import pytest

from heaprank import Config, FeedbackError, InputError, Refit, Reranker
from heaprank.learning.feedback import WRONG_WEIGHT
from heaprank.state import codec

NOW = 1_750_000_000.0
#: Two candidates of different kinds: each has feature rows of its own (kind:fact, kind:note)
CANDS = [{"id": "a", "text": "We met in Lisbon on 2024-05-01", "kind": "fact", "score": 0.9},
         {"id": "b", "text": "I moved to Porto, my flat is on Rua Nova", "kind": "note",
          "score": 0.5}]


def _shown(rr, ns="maya"):
    ranking = rr.rerank("where do I live?", CANDS, namespace=ns, k=2, now=NOW)
    assert list(ranking.ids) == ["a", "b"]
    return ranking


def _note_neg(rr, ns="maya") -> float:
    """Negative evidence of b's own feature (kind:note) in ``ns``."""
    return float(rr.state.read_links(ns, ["kind:note"]).neg[0])


def _config():
    return Config(refit=Refit(every=0))


def test_each_label_teaches_the_links_its_own_amount(state):
    rr = Reranker(state, config=_config())
    plain = _shown(rr, "plain")
    rr.feedback(plain.recall_id, used=["a"])  # b ignored at rank 2: 1 / log2(3)
    assert _note_neg(rr, "plain") == pytest.approx(1.0 / math.log2(3.0))
    wrong = _shown(rr, "wrong")
    rr.feedback(wrong.recall_id, used=["a"], labels={"b": "wrong"})
    assert _note_neg(rr, "wrong") == pytest.approx(WRONG_WEIGHT)
    outdated = _shown(rr, "outdated")
    rr.feedback(outdated.recall_id, used=["a"], labels={"b": "outdated"})
    assert _note_neg(rr, "outdated") == 0.0  # its shape was right: no evidence against it
    used = _shown(rr, "used")
    rr.feedback(used.recall_id, labels={"a": "used", "b": "ignored"})
    assert _note_neg(rr, "used") == pytest.approx(1.0 / math.log2(3.0))
    assert rr.state.read_links("used", ["kind:fact"]).pos[0] > 0
    stored = {ns: rr.state.get_impression(r.recall_id).verdicts
              for ns, r in (("wrong", wrong), ("outdated", outdated), ("used", used))}
    assert stored == {"wrong": (codec.USED, codec.WRONG),
                      "outdated": (codec.USED, codec.OUTDATED),
                      "used": (codec.USED, codec.IGNORED)}


def test_labels_are_idempotent_and_cannot_be_changed(state):
    rr = Reranker(state, config=_config())
    ranking = _shown(rr)
    first = rr.feedback(ranking.recall_id, used=["a"], labels={"b": "wrong"})
    assert set(first.applied) == {"a", "b"}
    again = rr.feedback(ranking.recall_id, used=["a"], labels={"b": "wrong"})
    assert again.applied == () and set(again.already_recorded) == {"a", "b"}
    assert _note_neg(rr) == pytest.approx(WRONG_WEIGHT)  # not counted twice
    with pytest.raises(FeedbackError, match="'b' was already recorded as wrong"):
        rr.feedback(ranking.recall_id, used=["a"], labels={"b": "outdated"})
    with pytest.raises(FeedbackError, match="'b' was already recorded as wrong"):
        rr.feedback(ranking.recall_id, used=["a"])  # (b: ignored)
    assert _note_neg(rr) == pytest.approx(WRONG_WEIGHT)


def test_an_all_outdated_feedback_is_recorded(state):
    rr = Reranker(state, config=_config())
    ranking = _shown(rr)
    done = rr.feedback(ranking.recall_id, labels={"a": "outdated", "b": "outdated"})
    assert set(done.applied) == {"a", "b"}
    assert rr.state.get_impression(ranking.recall_id).verdicts == (codec.OUTDATED,) * 2
    assert rr.stats()["feedbacks"] == 1


def test_labels_go_through_feedback_many_afeedback_and_the_explicit_form(state):
    rr = Reranker(state, config=_config())
    one, two = _shown(rr), _shown(rr)
    out = rr.feedback_many([(one.recall_id, ["a"], {"b": "outdated"}), (two.recall_id, ["b"])])
    assert not any(isinstance(o, Exception) for o in out)
    assert rr.state.get_impression(one.recall_id).verdicts == (codec.USED, codec.OUTDATED)
    assert rr.state.get_impression(two.recall_id).verdicts == (codec.IGNORED, codec.USED)
    three = _shown(rr)

    async def give() -> None:
        try:
            await rr.afeedback(three.recall_id, used=["a"], labels={"b": "wrong"})
        finally:
            if hasattr(state, "aclose_loop"):  # the async client of this loop (Redis)
                await state.aclose_loop()

    asyncio.run(give())
    assert rr.state.get_impression(three.recall_id).verdicts == (codec.USED, codec.WRONG)
    explicit = rr.feedback(namespace="maya", query="where do I live?", shown=CANDS, used=["b"],
                           labels={"a": "outdated"}, now=NOW, feedback_id="f1")
    assert rr.state.get_impression(explicit.recall_id).verdicts == (codec.OUTDATED, codec.USED)


def test_labels_are_counted_in_the_tuning_log_and_forgotten_with_the_namespace(state):
    rr = Reranker(state, config=_config())
    for label in ("outdated", "wrong", "outdated"):
        rr.feedback(_shown(rr).recall_id, used=["a"], labels={"b": label})
    rr.feedback(_shown(rr, "other").recall_id, used=["a"], labels={"b": "wrong"})
    assert rr.tune().labels == {"outdated": 2, "wrong": 2}
    rr.forget_namespace("maya")
    assert rr.tune().labels == {"outdated": 0, "wrong": 1}
    assert all(imp.namespace == "other" for imp in rr.state.feedback_log(None))


def test_bad_labels_are_refused_naming_the_field_before_anything_is_written(state):
    rr = Reranker(state, config=_config())
    ranking = _shown(rr)
    with pytest.raises(InputError, match=r"labels\['b'\]: expected one of 'used', 'ignored', "
                                         r"'outdated', 'wrong', got 'stale'"):
        rr.feedback(ranking.recall_id, used=["a"], labels={"b": "stale"})
    with pytest.raises(ValueError, match="labels: id 'zz' was not shown"):
        rr.feedback(ranking.recall_id, used=["a"], labels={"zz": "wrong"})
    with pytest.raises(InputError, match=r"labels\['a'\]: 'wrong', but the id is also in used="):
        rr.feedback(ranking.recall_id, used=["a"], labels={"a": "wrong"})
    with pytest.raises(TypeError, match="labels: expected a mapping"):
        rr.feedback(ranking.recall_id, used=["a"], labels=["b"])
    with pytest.raises(ValueError, match="labels: id 'zz' is not among the shown ids"):
        rr.feedback(namespace="maya", query="q", shown=CANDS, used=["a"], labels={"zz": "wrong"})
    (many,) = rr.feedback_many([(ranking.recall_id, ["a"], {"zz": "wrong"})])
    assert isinstance(many, FeedbackError) and "labels: id 'zz' was not shown" in str(many)
    assert rr.state.get_impression(ranking.recall_id).verdicts == (codec.OPEN, codec.OPEN)
    assert rr.stats()["impressions"] == 1  # the refused explicit form recorded nothing

