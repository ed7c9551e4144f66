"""The fast hot path against frozen copies of the straightforward computation it replaced.

``_reference_explain`` and ``_reference_details`` are the EXPLAIN line and the per-signal details
as they were written before the hot path was restructured (field by field, one candidate at a
time); ``_reference_rows`` is a candidate's feature row straight from
:func:`heaprank.features.retrieval_features`. On random candidates, queries, weights and
learned state, every result must carry the same text and the same feature names.
"""

from __future__ import annotations

import dataclasses
import math
import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank import Config, CoUse, Reranker, SQLiteState, Weights
from heaprank.candidates import coerce_candidates
from heaprank.features import FeatureSpace, analyze_query, retrieval_features, shape_of
from tests.strategies import NOW, candidate_lists, queries

DAY_S = 86_400.0
_LABEL = {"relevance": "rel", "recency": "recency", "importance": "importance",
          "usefulness": "useful", "association": "assoc"}

weights = st.builds(
    Weights,
    relevance=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    recency=st.sampled_from([0.0, 1.0, 1.5]),
    importance=st.sampled_from([0.0, 1.0, 0.25]),
    usefulness=st.sampled_from([0.0, 1.0, 1.5, 3.0]),
    reinforcement=st.sampled_from([0.0, 1.0]),
    association=st.sampled_from([0.0, 0.5]),
)
#: The other signals' settings: exploration (a note on usefulness) and co-use edges.
extras = st.fixed_dictionaries({"exploration_rate": st.sampled_from([0.0, 1.0]),
                                "co_use": st.sampled_from([None, CoUse()])})


def _reference_explain(item) -> str:
    parts: list[str] = []
    for name, value in item.signals.items():
        weight = item.weights.get(name, 1.0)
        if weight == 0:
            continue
        text = f"{_LABEL.get(name, name)} {value:.2f}"
        if weight != 1:
            text += f"^{weight:g}"
        detail = item.details.get(name)
        if detail:
            text += f" ({detail})"
        if name == "usefulness" and item.top_links:
            text += " [" + ", ".join(f"{f}={p:.2f}" for f, p in item.top_links) + "]"
        parts.append(text)
    line = " x ".join(parts)
    if item.rules:
        line += " x rules " + ", ".join(f"{n} x{m:g}" for n, m in item.rules)
    if item.flags:
        line += " ! " + "; ".join(item.flags)
    return line


def _reference_details(batch, has_content: bool, i: int, age_s: float,
                       use_count: float) -> dict[str, str]:
    score = batch.scores[i]
    if not has_content:
        rel = "empty query"
    elif math.isnan(score):
        rel = f"rank {i + 1}" if np.isnan(batch.scores).all() else "no valid score"
    else:
        rel = f"score {score:.4g}"
    if math.isnan(age_s):
        rec = "no date"
    else:
        rec = f"age {age_s / DAY_S:.1f}d"
        if use_count > 0:
            rec += f", used {use_count:g}x"
    imp = "explicit" if not math.isnan(batch.importance[i]) else batch.kinds[i] or "default"
    if not math.isnan(batch.source_count[i]):
        imp += f", {batch.source_count[i]:g} sources"
    return {"relevance": rel, "recency": rec, "importance": imp}


@given(candidate_lists(min_size=1, scored=None), queries, weights, extras, st.integers(1, 12),
       st.lists(st.integers(0, 11), max_size=3))
def test_explain_and_details_match_the_reference(cands, query, w, extra, k, used):
    if w.association > 0 and extra["co_use"] is None:
        extra = {**extra, "co_use": CoUse()}
    rr = Reranker(config=Config(weights=w, **extra))
    first = rr.rerank(query, cands, namespace="ns", k=k, now=NOW)
    rr.feedback(first.recall_id, used=[first.ids[u] for u in used if u < len(first)],
                now=NOW)
    ranking = rr.rerank(query, cands, namespace="ns", k=k, now=NOW + DAY_S)
    batch = coerce_candidates(cands, now=NOW + DAY_S)
    position = {c: i for i, c in enumerate(batch.ids)}
    docs = rr.state.read_docs("ns", batch.ids)
    has_content = analyze_query(query).has_content
    for item in ranking:
        i = position[item.id]
        last = np.fmax(np.fmax(docs.last_used[i], batch.last_used[i]), batch.created_at[i])
        expected = _reference_details(batch, has_content, i, NOW + DAY_S - last,
                                      docs.use_count[i])
        for name, text in expected.items():  # notes of the other signals may follow
            assert item.details[name] == text or item.details[name].startswith(text + ", ")
        line = item.explain()
        assert line == _reference_explain(item)
        assert item.explain() is line  # composed once
        # a copy composes its own line, field by field
        assert dataclasses.replace(item).explain() == line
        assert dataclasses.replace(item, weights={**item.weights, "relevance": 0.0}).explain() \
            == _reference_explain(dataclasses.replace(item, weights={**item.weights,
                                                                      "relevance": 0.0}))


@given(candidate_lists(min_size=1, max_size=12), queries, st.booleans(), st.booleans())
def test_feature_rows_name_the_reference_features(cands, query, doc_features, tags):
    info = analyze_query(query)
    batch = coerce_candidates(cands, now=NOW)
    tag_slots = ("travel",) if tags else ()
    space = FeatureSpace(max_bytes=2_000)  # evicts: misses and hits both run
    for _ in range(2):
        distinct, of = space.rows(info, batch.ids, batch.texts, batch.kinds, batch.sources,
                                  batch.tags, tag_slots, doc_features, None)
        for i, row in enumerate(distinct[of].tolist()):
            shape = shape_of(batch.texts[i], batch.kinds[i], batch.sources[i], batch.tags[i],
                             tag_slots)
            expected = retrieval_features(info, shape, batch.sources[i],
                                          batch.ids[i] if doc_features else None,
                                          ("prev:none", "next:none"))
            assert space.names_of(row) == expected
        assert len(set(of.tolist())) == len(distinct)


@pytest.fixture(scope="module")
def db_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kept")


@given(candidate_lists(min_size=2, max_size=8, scored=None), queries,
       st.lists(st.lists(st.integers(0, 7), max_size=2), min_size=1, max_size=4),
       st.sampled_from(["memory", "sqlite", "sqlite, feedback through another connection"]))
def test_links_kept_between_feedbacks_follow_every_feedback(db_dir, cands, query, steps, kind):
    """A reranker keeps its links between feedbacks (on a state with a version): after each
    feedback, through it or through another connection to the same file, it ranks exactly as
    a reranker that never kept any, on the same state."""
    if kind == "memory":
        rr = writer = Reranker()
    else:
        path = db_dir / f"{uuid.uuid4().hex}.db"
        rr = Reranker(SQLiteState(path))
        writer = rr if kind == "sqlite" else Reranker(SQLiteState(path))
    for used in steps:
        for _ in range(2):  # the second rerank is served from what the first kept
            kept = rr.rerank(query, cands, namespace="ns", k=len(cands), now=NOW)
            fresh = Reranker(rr.state).rerank(query, cands, namespace="ns", k=len(cands),
                                              now=NOW, track=False)
            assert [(r.id, r.score, r.explain()) for r in kept] == \
                [(r.id, r.score, r.explain()) for r in fresh]
        writer.feedback(kept.recall_id, used=[kept.ids[u] for u in used if u < len(kept)],
                        now=NOW)
    rr.forget_namespace("ns")
    assert not rr._row_cache
    rr.close()
    writer.close()
