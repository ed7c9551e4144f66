"""The fast hot path against frozen copies of the straightforward computation it replaced.

``_reference_explain`` and ``_reference_details`` are the EXPLAIN line and the per-signal details
as they were written before the hot path was restructured (field by field, one candidate at a
time); ``_reference_rows`` is a candidate's feature row straight from
:func:`heaprank.model.features.retrieval_features`. On random candidates, queries, weights,
learned state and quality levers (speaker roles, temporal intent, retriever-score fusion,
per-question-type weights), every result must carry the same text and the same feature names.
"""

from __future__ import annotations

import dataclasses
import math
import uuid

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from heaprank import Config, CoUse, Reranker, SQLiteState, Weights
from heaprank.model.features import (
    N_STRUCTURE_CODES,
    NO_NEIGHBOURS,
    NO_STRUCTURE,
    STRUCTURE_SLOTS,
    retrieval_features,
    shape_of,
)
from heaprank.model.questions import analyze_query
from heaprank.scoring.candidates import coerce_candidates
from heaprank.scoring.space import FeatureSpace
from tests.strategies import NOW, batch_of, candidate_lists, queries

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
#: The other signals' settings (``Config.with_changes`` form): exploration (a note on
#: usefulness) and co-use edges.
extras = st.fixed_dictionaries({
    "exploration": st.fixed_dictionaries({"rate": st.sampled_from([0.0, 1.0])}),
    "learning": st.fixed_dictionaries({"co_use": st.sampled_from([None, CoUse()])}),
})
#: The quality levers: whose statements, temporal intent, fused retriever scores, per-type weights.
levers = st.fixed_dictionaries({
    "features": st.fixed_dictionaries({"speaker_roles": st.booleans()}),
    "scoring": st.fixed_dictionaries({
        "intent_recency": st.sampled_from([{}, {"recent": 2.0}, {"recent": 1.5, "past": -0.5}]),
        "fusion_weights": st.sampled_from([{}, {"dense": 1.0}, {"dense": 0.5, "bm25": 2.0}]),
    }),
    "qtype_weights": st.sampled_from([{}, {"when": Weights(recency=2.0, usefulness=0.5)},
                                      {"what": Weights(relevance=2.0), "who": Weights()}]),
})
#: Questions that carry a temporal intent and a grammatical person, besides the usual ones.
LEVER_QUESTIONS = ["What is my latest plan?", "Where did you say we stay now?",
                   "What did I eat in 2019?", "What did you recommend last summer?",
                   "Can you remind me what my current seat is?", "What is the plan?",
                   "When did we book it, and what is it now?"]
lever_queries = st.one_of(st.sampled_from(LEVER_QUESTIONS), queries)
#: A candidate's structure code: its neighbour slots and, from code 25 on, first-stage slots.
structures = st.integers(0, N_STRUCTURE_CODES - 1)


@st.composite
def fused_candidates(draw: st.DrawFn) -> list[dict]:
    """Candidates, some carrying retriever scores to fuse and some a thread and position."""
    cands = draw(candidate_lists(min_size=1, scored=None))
    for i, cand in enumerate(cands):
        meta = cand.setdefault("metadata", {})
        given = {n: draw(st.integers(-100, 100)) / 10 for n in ("dense", "bm25")
                 if draw(st.booleans())}
        if given:
            meta["retriever_scores"] = given
        if draw(st.booleans()):
            meta["thread"] = draw(st.sampled_from(["s1", "s2"]))
            meta["position"] = i
    return cands


def _reference_explain(item) -> str:
    parts: list[str] = []
    for name, value in item.signals.items():
        weight = item.weights.get(name, 1.0)
        if weight == 0:
            continue
        text = f"{_LABEL.get(name, name)} {value:.2f}"
        if weight != 1:
            text += f"^{weight:.3g}"
        detail = item.details.get(name)
        if detail:
            text += f" ({detail})"
        if name == "usefulness" and item.top_links:
            text += " [" + ", ".join(f"{f}={p:.2f}" for f, p in item.top_links) + "]"
        parts.append(text)
    line = " x ".join(parts)
    if item.rules:
        line += " x rules " + ", ".join(f"{n} x{m:.3g}" for n, m in item.rules)
    if item.flags:
        line += " ! " + "; ".join(item.flags)
    return line


def _reference_details(batch, info, cfg: Config, i: int, age_s: float,
                       use_count: float) -> dict[str, str]:
    score = batch.scores[i]
    if not info.has_content:
        rel = "empty query"
    elif math.isnan(score):
        rel = f"rank {i + 1}" if np.isnan(batch.scores).all() else "no valid score"
    else:
        rel = f"score {score:.3g}"
    if info.has_content and cfg.scoring.fusion_weights:
        given = batch.items[i].get("metadata", {}).get("retriever_scores", {})
        for name in cfg.scoring.fusion_weights:
            rel += f", {name} {float(given[name]):.3g}" if name in given else f", no {name}"
    if math.isnan(age_s):
        rec = "no date"
    else:
        rec = f"age {age_s / DAY_S:.1f}d"
        if use_count > 0:
            rec += f", used {use_count:g}x"
    if info.intent != "none" and cfg.scoring.intent_recency.get(info.intent, 1.0) != 1.0:
        rec += f", asks for {info.intent}"
    imp = "explicit" if not math.isnan(batch.importance[i]) else batch.kinds[i] or "default"
    if not math.isnan(batch.source_count[i]):
        imp += f", {batch.source_count[i]:g} sources"
    return {"relevance": rel, "recency": rec, "importance": imp}


def _reference_weights(cfg: Config, info) -> dict[str, float]:
    weights = dataclasses.asdict(cfg.qtype_weights.get(info.qtype, cfg.weights))
    if info.intent in cfg.scoring.intent_recency:
        weights["recency"] *= cfg.scoring.intent_recency[info.intent]
    return weights


@given(fused_candidates(), lever_queries, weights, extras, levers, st.integers(1, 12),
       st.lists(st.integers(0, 11), max_size=3))
def test_explain_and_details_match_the_reference(cands, query, w, extra, lever, k, used):
    if w.association > 0 and extra["learning"]["co_use"] is None:
        extra = {**extra, "learning": {"co_use": CoUse()}}
    cfg = Config().with_changes(weights=w, **extra, **lever)
    rr = Reranker(config=cfg)
    first = rr.rerank(query, cands, namespace="ns", k=k, now=NOW)
    rr.feedback(first.recall_id, used=[first.ids[u] for u in used if u < len(first)],
                now=NOW)
    ranking = rr.rerank(query, cands, namespace="ns", k=k, now=NOW + DAY_S)
    batch = coerce_candidates(cands, now=NOW + DAY_S)
    position = {c: i for i, c in enumerate(batch.ids)}
    docs = rr.state.read_docs("ns", batch.ids)
    info = analyze_query(query)
    for item in ranking:
        i = position[item.id]
        assert item.weights == _reference_weights(cfg, info)
        last = np.fmax(np.fmax(docs.last_used[i], batch.last_used[i]), batch.created_at[i])
        expected = _reference_details(batch, info, cfg, i, NOW + DAY_S - last,
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


@given(candidate_lists(min_size=1, max_size=12), st.lists(lever_queries, min_size=1, max_size=3),
       st.booleans(), st.booleans(), st.booleans(),
       st.none() | st.lists(structures, min_size=12, max_size=12))
@example(  # one question type, three grammatical persons: the person is part of the row's key
    [{"id": s, "text": "hi", "metadata": {"source": s}} for s in ("user", "assistant", "x")],
    LEVER_QUESTIONS[:1] + LEVER_QUESTIONS[3:4] + LEVER_QUESTIONS[5:6], False, False, True, None)
def test_feature_rows_name_the_reference_features(cands, questions, doc_features, tags,
                                                  speaker_roles, structure):
    batch = coerce_candidates(cands, now=NOW)
    tag_slots = ("travel",) if tags else ()
    structure = None if structure is None else structure[:len(batch)]
    space = FeatureSpace(max_bytes=2_000)  # evicts: misses and hits both run
    for query in questions * 2:  # several questions share the space's rows
        info = analyze_query(query)
        distinct, of = space.rows(info, batch, structure=structure, tag_slots=tag_slots,
                                  doc_features=doc_features, speaker_roles=speaker_roles)
        for i, row in enumerate(distinct[of].tolist()):
            shape = shape_of(batch.texts[i], batch.kinds[i], batch.sources[i], batch.tags[i],
                             tag_slots)
            expected = retrieval_features(info, shape, batch.sources[i],
                                          batch.ids[i] if doc_features else None,
                                          STRUCTURE_SLOTS[NO_STRUCTURE if structure is None
                                                          else structure[i]],
                                          speaker_roles)
            assert space.names_of(row) == expected
        assert len(set(of.tolist())) == len(distinct)


@given(st.lists(st.tuples(st.sampled_from(["hi", "Maya left", "none of it", "Is Ben here?"]),
                          st.sampled_from([None, "none", "maya", "Maya", "Ben Ng", ""])),
                min_size=1, max_size=12),
       st.lists(st.sampled_from(["Is there none left?", "What did Maya say?",
                                 "Did Ben and Maya say none?", "What is the plan?"]),
                min_size=1, max_size=3), st.booleans())
def test_grouped_rows_name_the_reference_features_whatever_the_sources(cands, questions,
                                                                       speaker_roles):
    """Candidates grouped by one int key per row: sources that share a slot (no source,
    ``""``, ``"none"``) or not, named by the question or not, with shared names or not."""
    texts = [text for text, _ in cands]
    sources = [source for _, source in cands]
    ids = [str(i) for i in range(len(cands))]
    space = FeatureSpace()
    for query in questions * 2:  # built, then served from the caches
        info = analyze_query(query)
        distinct, of = space.rows(info, batch_of(ids, texts, None, sources), structure=None,
                                  tag_slots=(), doc_features=False, speaker_roles=speaker_roles)
        for i, row in enumerate(distinct[of].tolist()):
            shape = shape_of(texts[i], None, sources[i], frozenset(), ())
            assert space.names_of(row) == retrieval_features(info, shape, sources[i], None,
                                                             NO_NEIGHBOURS, speaker_roles)
        assert sorted(set(of.tolist())) == list(range(len(distinct)))


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
    assert not rr._evidence._kept
    rr.close()
    writer.close()


def _links_of(state) -> dict:
    out = {ns: tuple(map(repr, state.list_links(ns))) for ns in state.namespaces()}
    out[None] = repr(state.list_links(None))
    return out


@given(candidate_lists(min_size=2, max_size=8, scored=None), queries,
       st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 7), max_size=2)),
                min_size=1, max_size=5))
def test_feedback_with_the_reranks_link_means_learns_what_a_read_gives(cands, query, steps):
    """Memory feedback takes the link means its rerank read while the state's version stands
    (kept per recall), and reads them again once another feedback changed the counts: the
    learned links are the same, to the bit, as a state that always reads."""
    def learn(keep_means: bool) -> dict:
        first = Reranker()
        second = Reranker(first.state)  # its feedback changes what first read
        for rerank in (first, second):
            if not keep_means:
                rerank._impressions.means = _NoMeans()
        for crossed, used in steps:
            a = first.rerank(query, cands, namespace="ns", k=len(cands), now=NOW)
            b = second.rerank(query, cands, namespace="ns", k=len(cands), now=NOW)
            picked = [u for u in used if u < len(cands)]
            order = ((second, b), (first, a)) if crossed else ((first, a), (second, b))
            for rr, ranking in order:
                rr.feedback(ranking.recall_id, used=[ranking.ids[u] for u in picked], now=NOW)
        return _links_of(first.state)

    assert learn(True) == learn(False)


class _NoMeans(dict):
    """A reranker's store of link means that keeps none."""

    def __setitem__(self, key: object, value: object) -> None:
        pass
