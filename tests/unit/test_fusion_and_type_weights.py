"""Retriever fusion (several first-stage scores blended into one relevance) and per-question-type
weights."""

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank import Config, Features, Reranker, Scoring
from heaprank.config import RECENCY_EVERY_QUESTION, Weights
from heaprank.errors import ConfigError, InputError, InputTypeError
from heaprank.scoring.fusion import fuse
from tests.job_facts import NOW, job_facts

# ------------------------------------------------------------------ retriever fusion


def _hybrid() -> list[dict[str, object]]:
    return [
        {"id": "lexical", "text": "flight Lisbon flight", "score": 9.0,
         "metadata": {"retriever_scores": {"dense": 0.20}}},
        {"id": "semantic", "text": "Booked: SFO to LIS on March 14", "score": 7.0,
         "metadata": {"retriever_scores": {"dense": 0.90}}},
        {"id": "weak", "text": "Something else", "score": 1.0,
         "metadata": {"retriever_scores": {"dense": 0.10}}},
        {"id": "no-dense", "text": "Another thing", "score": 6.0},
    ]


def test_fusion_blends_the_named_scores() -> None:
    q = "When is my flight?"
    assert Reranker().rerank(q, _hybrid(), now=NOW).ids[:2] == ["lexical", "semantic"]
    fused = Reranker(config=Config(scoring=Scoring(fusion_weights={"dense": 1.0}))).rerank(
        q, _hybrid(), now=NOW)
    assert fused.ids[:2] == ["semantic", "lexical"]
    # A candidate without the score counts as that retriever's lowest: (6-1)/8 / 2 < weak's.
    rel = {r.id: r.signals["relevance"] for r in fused}
    assert rel["semantic"] == 1.0 and rel["no-dense"] < rel["lexical"]
    assert "dense 0.9" in fused[0].explain() and "no dense" in fused.explain(4)
    # Weight 0, or a score no candidate carries: the relevance of the primary score alone.
    for cfg in (Config(scoring=Scoring(fusion_weights={"dense": 0.0})),
                Config(scoring=Scoring(fusion_weights={"bm25": 1.0}))):
        same = Reranker(config=cfg).rerank(q, _hybrid(), now=NOW)
        assert same.ids == Reranker().rerank(q, _hybrid(), now=NOW).ids
        assert [r.signals["relevance"] for r in same] == pytest.approx(
            [r.signals["relevance"] for r in Reranker().rerank(q, _hybrid(), now=NOW)])


@pytest.mark.parametrize("value, error, text", [
    ({"dense": "high"}, InputTypeError, r"metadata.retriever_scores\['dense'\]: expected a number"),
    ({"dense": True}, InputTypeError, r"retriever_scores\['dense'\]"),
    ({"dense": math.inf}, InputError, r"retriever_scores\['dense'\]: must be finite"),
    ([0.3], InputTypeError, r"candidates\[1\] \(id 'b'\)\.metadata\.retriever_scores: expected a "
                            r"mapping"),
])
def test_fusion_rejects_bad_scores(value: object, error: type, text: str) -> None:
    cands = [{"id": "a", "text": "x", "score": 1.0, "metadata": {"retriever_scores": {"dense": 1}}},
             {"id": "b", "text": "y", "score": 2.0, "metadata": {"retriever_scores": value}}]
    rr = Reranker(config=Config(scoring=Scoring(fusion_weights={"dense": 1.0})))
    with pytest.raises(error, match=text):
        rr.rerank("what colour?", cands, now=NOW)
    Reranker().rerank("what colour?", cands, now=NOW)  # not read unless named


def test_fusion_weights_are_validated() -> None:
    with pytest.raises(ConfigError, match=r"fusion_weights\['dense'\]"):
        Config(scoring=Scoring(fusion_weights={"dense": -1.0}))
    with pytest.raises(ConfigError, match="fusion_weights"):
        Config(scoring=Scoring(fusion_weights={"": 1.0}))


scores = st.lists(st.integers(-500, 500).map(lambda x: x / 100), min_size=1, max_size=12)


@given(st.data())
def test_fuse_properties(data: st.DataObject) -> None:
    """On [floor, 1]; the top is 1 unless all tie; a candidate at least as good on every score
    is fused at least as high; weight 0 is the primary relevance min-max mapped."""
    rel = np.array(data.draw(scores))
    n = len(rel)
    other = np.array(data.draw(st.lists(st.one_of(st.none(), st.integers(0, 100)),
                                        min_size=n, max_size=n)), dtype=float)
    w = data.draw(st.integers(0, 4).map(float))
    floor = 0.02
    out = fuse(rel, other[:, None], [w], floor)
    assert np.all(out >= floor - 1e-12) and np.all(out <= 1 + 1e-12)
    filled = np.where(np.isnan(other), np.nanmin(other) if not np.isnan(other).all() else 0,
                      other)
    for i in range(n):
        for j in range(n):
            if rel[i] >= rel[j] and filled[i] >= filled[j]:
                assert out[i] >= out[j] - 1e-9
    if len(set(out.tolist())) > 1:
        assert out.max() == pytest.approx(1.0)
    if w == 0:
        lo, hi = rel.min(), rel.max()
        expect = np.ones(n) if hi == lo else floor + (1 - floor) * (rel - lo) / (hi - lo)
        assert out == pytest.approx(expect)


# ------------------------------------------------------------------ per-type weights


def test_qtype_weights_apply_to_their_question_type() -> None:
    # recency on every question (the default keeps it for questions that ask for it)
    cfg = Config(qtype_weights={"when": Weights(recency=3.0, usefulness=0.5)},
                 scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION))
    rr = Reranker(config=cfg)
    cands = job_facts()
    when = rr.rerank("When did I start at the bakery?", cands, now=NOW)
    what = rr.rerank("What is my job?", cands, now=NOW)
    assert when[0].weights["recency"] == 3.0 and when[0].weights["usefulness"] == 0.5
    assert what[0].weights["recency"] == 1.0
    assert "^3" in when[0].explain()
    written = cfg.to_dict()["qtype_weights"]["when"]
    assert written["recency"] == 3.0 and written["usefulness"] == 0.5
    # A config file holds the levers as plain data and reads back the same config.
    levers = Config(qtype_weights={"when": Weights(recency=3.0)},
                    features=Features(speaker_roles=True),
                    scoring=Scoring(intent_recency={"past": -8.0}, fusion_weights={"dense": 1.0}))
    assert Config.from_dict(json.loads(json.dumps(levers.to_dict()))) == levers
    with pytest.raises(ConfigError, match="qtype_weights"):
        Config(qtype_weights={"whenever": Weights()})
    with pytest.raises(ConfigError, match=r"qtype_weights\['when'\]: expected Weights"):
        Config(qtype_weights={"when": 2.0})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"qtype_weights\['when'\]\.speed: unknown field"):
        Config(qtype_weights={"when": {"speed": 2.0}})  # type: ignore[dict-item]
    assert Config(qtype_weights={"when": {"recency": 2.0}}).weights_for(  # type: ignore[dict-item]
        "when") == Weights(recency=2.0)


def test_fusion_ranks_the_neighbours_by_the_blend() -> None:
    """The neighbour slots name the turn next to the best match: with fusion, the best match
    of the blended relevance, not of the primary score alone."""
    turns = [{"id": f"t{i}", "text": f"turn number {i}", "score": s,
              "metadata": {"thread": "s1", "position": i, "retriever_scores": {"dense": d}}}
             for i, (s, d) in enumerate([(9.0, 0.1), (1.0, 0.1), (5.0, 0.9), (1.5, 0.1)])]

    def prev_of(cfg: Config, doc: str) -> str:
        rr = Reranker(config=cfg)
        ranking = rr.rerank("which turn?", turns, now=NOW, k=4)
        imp = rr.state.get_impression(ranking.recall_id)
        assert imp is not None
        return next(s for s in imp.slots[imp.ids.index(doc)] if s.startswith("prev:"))

    assert prev_of(Config(), "t1") == "prev:top1"  # t0 is BM25's best
    assert prev_of(Config(), "t3") == "prev:top3"
    fused = Config(scoring=Scoring(fusion_weights={"dense": 2.0}))  # t2 is the blend's best
    assert prev_of(fused, "t3") == "prev:top1"
    assert prev_of(fused, "t1") == "prev:top3"
