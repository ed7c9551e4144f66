"""Day one equals the first stage (issue 24): with a fresh state and nothing real to say from
recency, importance or a rule, heaprank keeps the order of the scores it was handed, whatever
their scale."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from heaprank import Reranker

NOW = 1_750_000_000.0
DAY = 86_400.0
#: Questions with no temporal intent (recency applies only where a question asks for it).
QUESTIONS = ("What did we decide about the budget?", "Who booked the hotel in Lisbon?",
             "Where does Maya keep the spare keys?", "How many people came to the party?",
             "Why did the deploy fail?", "Did Ben like the concert?", "tell me about the trip")

#: Score scales first stages use, each a strictly increasing map of a quality ``x`` in [0, 1].
SCALES = {
    "bm25": lambda x, a, b: 12.0 * x + 0.5,
    "cosine near 1": lambda x, a, b: 0.97 + 0.029 * x,
    "rrf": lambda x, a, b: 1.0 / (60.0 + 50.0 * (1.0 - x)) + 1.0 / (61.0 + 50.0 * (1.0 - x)),
    "logits": lambda x, a, b: 8.0 * x - 5.0,
    "negative": lambda x, a, b: -3.0 - 1e-3 * (1.0 - x),
    "affine": lambda x, a, b: a * x + b,
}


@st.composite
def first_stage(draw: st.DrawFn) -> tuple[list[dict], list[str]]:
    """Candidates in an arbitrary input order, their scores on one scale, each with its own
    age, thread and position; and the ids in the order of the scores (ties: input order)."""
    n = draw(st.integers(1, 30))
    quality = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    scale = SCALES[draw(st.sampled_from(sorted(SCALES)))]
    a = 10.0 ** draw(st.floats(-6, 6))
    b = draw(st.floats(-1e6, 1e6))
    ages = draw(st.lists(st.floats(0, 3_000), min_size=n, max_size=n))
    texts = draw(st.lists(st.sampled_from([
        "ok", "Maya said the keys are in the drawer", "We agreed on $400 for the venue",
        "The deploy failed on March 3 because of the config", "Is it raining?",
        "Ben: the concert was loud but great, we stayed until the end of the encore"]),
        min_size=n, max_size=n))
    cands = [{"id": f"c{i}", "text": texts[i], "score": scale(q / 40.0, a, b),
              "metadata": {"created_at": NOW - ages[i] * DAY, "source": ("maya", "ben")[i % 2],
                           "thread": f"s{i % 3}", "position": i // 3}}
             for i, q in enumerate(quality)]
    order = sorted(range(n), key=lambda i: (-cands[i]["score"], i))
    return cands, [cands[i]["id"] for i in order]


@settings(max_examples=150, deadline=None)
@given(first_stage(), st.sampled_from(QUESTIONS), st.sampled_from(["memory", "fresh sqlite"]))
def test_day_one_keeps_the_order_handed_in_on_any_score_scale(tmp_path_factory, stage,
                                                              question, backend):
    cands, expected = stage
    state = None if backend == "memory" else \
        f"sqlite:///{tmp_path_factory.mktemp('d1') / 's.db'}"
    with Reranker(state) as rr:
        ranking = rr.rerank(question, cands, k=len(cands), now=NOW, track=False)
    # Scores closer than the 12 decimals relevance keeps of the span tie: input order then.
    assert list(ranking.order_ids) == expected
    assert all(math.isfinite(r.score) for r in ranking)


@given(first_stage(), st.sampled_from(QUESTIONS))
@settings(max_examples=50, deadline=None)
def test_an_affine_transform_of_the_scores_changes_nothing(stage, question):
    cands, _ = stage
    rr = Reranker()
    plain = rr.rerank(question, cands, k=len(cands), now=NOW, track=False)
    moved = [{**c, "score": 1e4 * c["score"] - 7.0} for c in cands]
    assert rr.rerank(question, moved, k=len(cands), now=NOW, track=False).order_ids \
        == plain.order_ids


def test_recency_importance_and_rules_still_speak_on_day_one():
    old = {"id": "old", "text": "Maya lives in Denver", "score": 0.95,
           "metadata": {"created_at": NOW - 400 * DAY}}
    new = {"id": "new", "text": "Maya lives in Austin", "score": 0.94,
           "metadata": {"created_at": NOW - 1 * DAY}}
    weak = {"id": "weak", "text": "ok", "score": 0.1}
    rr = Reranker()
    # No temporal intent: the first stage's order.
    assert rr.rerank("Where does Maya live?", [old, new, weak], now=NOW).order_ids == (
        "old", "new", "weak")
    # The question asks for the current state: recency speaks.
    assert rr.rerank("Where does Maya live now?", [old, new, weak], now=NOW).order_ids == (
        "new", "old", "weak")
    # An explicit importance speaks.
    heavy = {**new, "metadata": {**new["metadata"], "importance": 3.0}}
    assert rr.rerank("Where does Maya live?", [old, heavy, weak], now=NOW).order_ids == (
        "new", "old", "weak")
    # A supersede key speaks: the newer of two memories with one key wins.
    keyed = [{**c, "metadata": {**c["metadata"], "key": "maya.city"}} for c in (old, new)]
    assert rr.rerank("Where does Maya live?", keyed + [weak], now=NOW).order_ids[0] == "new"
