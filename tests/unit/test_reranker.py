"""The Reranker: purity of rerank, feedback in all its forms, links, forgetting, async twins."""

from __future__ import annotations

import asyncio
import copy
import math

import numpy as np
import pytest

from heaprank import (
    Candidate,
    Config,
    Features,
    FeedbackError,
    InputError,
    InputTypeError,
    Learning,
    Link,
    MemoryState,
    Prior,
    Reranker,
    Scoring,
    SQLiteState,
    StateUnavailableError,
    Weights,
)
from heaprank.config import RECENCY_EVERY_QUESTION

NOW = 1_750_000_000.0
DAY = 86_400.0
QUERY = "When is my flight to Lisbon?"


@pytest.fixture()
def cands() -> list[dict]:
    return [
        {"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3,
         "metadata": {"kind": "fact", "created_at": NOW - 20 * DAY, "tags": ["travel"]}},
        {"id": "seat", "text": "I prefer window seats", "score": 5.1,
         "metadata": {"kind": "preference", "source": "maya"}},
        {"id": "price", "text": "Flights to Lisbon cost $400", "score": 6.0,
         "metadata": {"kind": "tool_result"}},
        {"id": "chat", "text": "ok thanks", "score": 1.0},
    ]


@pytest.fixture()
def rr() -> Reranker:
    return Reranker()


def evidence(rr: Reranker, namespace: str | None = None) -> dict[str, tuple[float, float]]:
    features, pos, neg = rr.state.list_links(namespace)
    return {f: (p, n) for f, p, n in zip(features, pos.tolist(), neg.tolist(), strict=False)}


# ------------------------------------------------------------------------------ rerank

def test_rerank_never_mutates_the_callers_objects(rr, cands):
    cand_obj = Candidate("obj", "Zoë lands at 10:40", 3.0, {"kind": "fact", "tags": ["x"]})
    items = cands + [cand_obj]
    before = copy.deepcopy(items)
    meta_ids = [id(c.get("metadata")) for c in cands]
    ranking = rr.rerank(QUERY, items, namespace="maya", k=5, now=NOW)
    rr.feedback(ranking.recall_id, used=["lisbon"])
    rr.rerank(QUERY, items, namespace="maya", k=5, now=NOW + 1)
    assert items == before
    assert [id(c.get("metadata")) for c in cands] == meta_ids
    assert cand_obj.metadata == {"kind": "fact", "tags": ["x"]}
    # The result holds a converted candidate, not the caller's mapping.
    lisbon = next(r for r in ranking if r.id == "lisbon")
    assert isinstance(lisbon.candidate, Candidate)
    assert lisbon.candidate.metadata is not cands[0]["metadata"]


def test_rerank_writes_only_the_impression(rr, cands):
    rr.rerank(QUERY, cands, namespace="maya", k=2, now=NOW)
    # (the namespace object holding the open impression counts: it takes memory)
    assert rr.state.stats() == {"namespaces": 1, "links": 0, "global_links": 0, "documents": 0,
                                "impressions": 1, "feedbacks": 0, "open_impressions": 1,
                                "max_open_impressions": 100_000}
    assert rr.stats()["weights_fitted"] is None  # (and the weights it ranks with)
    assert rr.stats()["weights"]["usefulness"] == rr.config.weights.usefulness
    rr.rerank(QUERY, cands, namespace="maya", k=2, now=NOW, track=False)
    assert rr.stats()["impressions"] == 1


def test_impression_records_what_was_shown(rr, cands):
    ranking = rr.rerank(QUERY, cands, namespace="maya", k=2, now=NOW)
    imp = rr.state.get_impression(ranking.recall_id)
    assert imp.ids == tuple(ranking.ids) and imp.namespace == "maya"
    assert imp.time == NOW and imp.time_explicit is True and imp.qtype == "when"
    # 7 shape slots + qsrc/qent + prev/next neighbours + the person slot ("my": first person),
    # each plain and crossed with the qtype.
    assert len(imp.features) == 2 and all(len(f) == 2 * (7 + 2 + 2 + 1) for f in imp.features)
    assert imp.signal_names == ("relevance", "age_days", "importance", "usefulness", "rules")
    top = ranking[0]
    # A question whose intent leaves recency out (the default for "when is ...") logs no age.
    expected = (top.signals["relevance"], np.nan, top.signals["importance"],
                top.signals["usefulness"], 1.0)
    np.testing.assert_allclose(imp.signals[0], expected, rtol=1e-6)  # stored as float32
    every = rr.with_config(scoring={"intent_recency": RECENCY_EVERY_QUESTION}).rerank(
        QUERY, cands, namespace="maya", k=2, now=NOW)
    age_days = (NOW - every[0].candidate.metadata["created_at"]) / 86_400
    assert rr.state.get_impression(every.recall_id).signals[0][1] == pytest.approx(age_days)


def test_a_turn_after_the_top_hit_gets_prev_top1(rr):
    # The question turn names the topic (the retriever's top hit); the answer follows it.
    turns = [
        {"id": "ask", "text": "When is my flight to Lisbon?", "score": 0.9,
         "metadata": {"session": "s1", "turn": 4}},
        {"id": "other", "text": "Flights are cheap in May", "score": 0.7,
         "metadata": {"thread": "s2", "position": 5}},
        {"id": "answer", "text": "On March 3", "score": 0.2,
         "metadata": {"thread": "s1", "position": 5}},
        {"id": "loose", "text": "Lisbon is lovely", "score": 0.5},
    ]
    ranking = rr.rerank(QUERY, turns, namespace="maya", k=4, now=NOW)
    imp = rr.state.get_impression(ranking.recall_id)
    feats = dict(zip(imp.ids, imp.features, strict=True))
    assert {"prev:top1", "next:none", "qt:when&prev:top1"} <= set(feats["answer"])
    assert {"prev:none", "next:top10"} <= set(feats["ask"])  # the answer is 4th of 4
    for doc in ("other", "loose"):  # another thread's turn 5, and no thread at all
        assert {"prev:none", "next:none"} <= set(feats[doc])
    assert all(len(f) == 24 for f in imp.features)  # ("my": the person slot too)


def test_k_limits_the_results(rr, cands):
    assert len(rr.rerank(QUERY, cands, k=1, now=NOW)) == 1
    assert len(rr.rerank(QUERY, cands, k=100, now=NOW)) == 4


def test_config_can_be_overridden_per_call(rr, cands):
    only_rel = Config(weights=Weights(relevance=1, recency=0, importance=0, usefulness=0))
    assert rr.rerank(QUERY, cands, k=4, now=NOW, config=only_rel).ids == \
        ["lisbon", "price", "seat", "chat"]
    assert rr.config == Config()


def test_distance_scores(rr):
    cands = [{"id": f"c{i}", "text": "note", "score": d} for i, d in enumerate([0.9, 0.1, 0.5])]
    cfg = Config(weights=Weights(recency=0, importance=0, usefulness=0),
                 scoring=Scoring(score_kind="distance"))
    assert rr.rerank("What note?", cands, k=3, now=NOW, config=cfg).ids == ["c1", "c2", "c0"]


def test_doc_features_add_a_per_document_link(cands):
    rr = Reranker(config=Config(features=Features(doc_features=True)))
    ranking = rr.rerank(QUERY, cands, namespace="maya", k=2, now=NOW)
    imp = rr.state.get_impression(ranking.recall_id)
    assert [f[-1] for f in imp.features] == [f"doc:{i}" for i in ranking.ids]


def test_with_config_shares_the_state(rr, cands):
    assert rr.config.retention.recency_floor != 0.25  # the override below really is a change
    other = rr.with_config(retention={"recency_floor": 0.25})
    ranking = other.rerank(QUERY, cands, namespace="maya", k=2, now=NOW)
    rr.feedback(ranking.recall_id, used=[ranking.ids[0]])
    assert other.state is rr.state and other.config.retention.recency_floor == 0.25
    assert rr.config == Config()  # the original keeps its own config


def test_with_state_keeps_the_config_on_another_state(rr, cands, tmp_path):
    tuned = rr.with_config(retention={"recency_floor": 0.25})
    other = tuned.with_state(f"sqlite:///{tmp_path / 'other.db'}")
    ranking = other.rerank(QUERY, cands, namespace="maya", k=2, now=NOW)
    other.feedback(ranking.recall_id, used=[ranking.ids[0]])
    assert other.config == tuned.config and other.rules == tuned.rules
    assert other.stats()["feedbacks"] == 1 and rr.stats()["feedbacks"] == 0
    other.close()


# ---------------------------------------------------------------------------- feedback

def test_feedback_updates_links_and_doc_stats(cands):
    # An ignored item adds exactly 1 of negative evidence only without the position discount;
    # recency on every question (by default only where the question asks for it).
    rr = Reranker(config=Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION),
                                learning=Learning(reject_discount="none")))
    ranking = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    assert "lisbon" in ranking.ids and "chat" not in ranking.ids
    out = rr.feedback(ranking.recall_id, used=["lisbon"], namespace="maya")
    assert out.applied == tuple(ranking.ids) and out.already_recorded == ()
    ignored = [i for i in ranking.ids if i != "lisbon"]
    docs = rr.state.read_docs("maya", ["lisbon", *ignored, "chat"])
    assert docs.use_count.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert docs.last_used[0] == NOW and np.isnan(docs.last_used[1:]).all()
    ev = evidence(rr, "maya")
    assert ev["kind:fact"][0] > 0 and ev["kind:tool_result"] == (0.0, 1.0)
    assert rr.stats()["feedbacks"] == 1
    # The used document's usefulness and recency went up for the next, similar question.
    again = rr.rerank(QUERY, cands, namespace="maya", k=4, now=NOW + DAY)
    lisbon = next(r for r in again if r.id == "lisbon")
    assert lisbon.signals["usefulness"] > next(r for r in ranking if r.id == "lisbon") \
        .signals["usefulness"]
    assert lisbon.signals["recency"] > 0.97 and "used 1x" in lisbon.explain()


def test_feedback_refuses_a_bare_string_and_accepts_no_id(rr, cands):
    ranking = rr.rerank(QUERY, cands, k=2, now=NOW)
    with pytest.raises(InputTypeError, match=r"used: expected a list of ids, got the str"):
        rr.feedback(ranking.recall_id, used=ranking.ids[0])  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match=r"ids: expected a list of ids"):
        rr.mark_used(ranking.recall_id, ranking.ids[0])  # type: ignore[arg-type]
    assert rr.stats()["feedbacks"] == 0
    assert rr.feedback(ranking.recall_id, used=[ranking.ids[0]],
                       namespace="default").applied == tuple(ranking.ids)
    ranking = rr.rerank(QUERY, cands, k=2, now=NOW)
    out = rr.feedback(ranking.recall_id, namespace="default")  # nothing used: all ignored
    assert out.applied == tuple(ranking.ids)
    assert rr.state.get_impression(ranking.recall_id).resolved == {i: False for i in ranking.ids}


def test_feedback_type_errors(rr, cands):
    ranking = rr.rerank(QUERY, cands, k=2, now=NOW)
    with pytest.raises(InputTypeError, match=r"used\[0\]: expected str, got int"):
        rr.feedback(ranking.recall_id, used=[1])
    with pytest.raises(InputTypeError, match="used: expected a list of ids, got NoneType"):
        rr.feedback(ranking.recall_id, used=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="recall_id: expected str"):
        rr.feedback(12345, used=[])  # type: ignore[arg-type]


@pytest.mark.parametrize("state", ["memory", "sqlite"])
def test_used_ids_from_a_generator_or_a_set_are_read_once(state, cands, tmp_path):
    """A generator of used ids is read once, whichever path the feedback takes: a retry (which
    the memory state's lean path passes on to the general one) sees the same ids, not an
    exhausted generator, and so changes nothing."""
    rr = Reranker(None if state == "memory" else f"sqlite:///{tmp_path}/s.db")
    ranking = rr.rerank(QUERY, cands, k=3, now=NOW)
    first = rr.feedback(ranking.recall_id, used=(d for d in ranking.ids[:1]), now=NOW,
                        namespace="default")
    assert first.applied == tuple(ranking.ids)
    again = rr.feedback(ranking.recall_id, used=(d for d in ranking.ids[:1]), now=NOW,
                        namespace="default")
    assert again.applied == () and again.already_recorded == tuple(ranking.ids)
    again = rr.feedback(ranking.recall_id, used={ranking.ids[0]}, now=NOW)
    assert again.applied == ()


def test_bad_used_ids_are_refused_naming_the_field(rr, cands):
    """Bad used ids are refused before anything is read, the message naming the field."""
    ranking = rr.rerank(QUERY, cands, k=2, now=NOW)
    for used, error, message in (([""], InputError, r"used\[0\]: empty"),
                                 ([ranking.ids[0], b"x"], InputTypeError, r"used\[1\]: expected str"),
                                 (["  "], InputError, r"used\[0\]: whitespace only")):
        with pytest.raises(error, match=message):
            rr.feedback(ranking.recall_id, used=used)  # type: ignore[arg-type]
    assert rr.feedback(ranking.recall_id, used=[ranking.ids[0]],
                       namespace="default").applied == tuple(ranking.ids)


def test_mark_used_and_mark_ignored(rr, cands):
    ranking = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    first, second, third = ranking.ids
    assert rr.mark_used(ranking.recall_id, [first]).applied == (first,)
    assert rr.mark_ignored(ranking.recall_id, [second]).applied == (second,)
    imp = rr.state.get_impression(ranking.recall_id)
    assert imp.resolved == {first: True, second: False}
    # The rest stays open; feedback later fills it in without double counting.
    out = rr.feedback(ranking.recall_id, used=[first], namespace="maya")
    assert out.applied == (third,) and set(out.already_recorded) == {first, second}
    assert rr.state.read_docs("maya", [first]).use_count[0] == 1.0
    with pytest.raises(FeedbackError, match="already recorded as ignored"):
        rr.mark_used(ranking.recall_id, [second])
    with pytest.raises(FeedbackError, match="not shown"):
        rr.mark_ignored(ranking.recall_id, ["chat"])


def test_reject_discount_by_position(cands):
    rr = Reranker(config=Config(learning=Learning(reject_discount="log")))
    ranking = rr.rerank(QUERY, cands, namespace="n", k=3, now=NOW)
    rr.feedback(ranking.recall_id, used=[])
    imp = rr.state.get_impression(ranking.recall_id)
    counts = rr.state.read_links("n", [imp.features[r][0] for r in range(3)])  # kind: slots
    assert counts.neg.tolist() == pytest.approx([1.0, 1 / math.log2(3), 0.5])


def test_uniform_credit_without_em(cands):
    rr = Reranker(config=Config(learning=Learning(em_credit=False)))
    ranking = rr.rerank(QUERY, cands, namespace="n", k=1, now=NOW)
    rr.feedback(ranking.recall_id, used=ranking.ids)
    n = len(rr.state.get_impression(ranking.recall_id).features[0])
    assert n == 24
    _, pos, neg = rr.state.list_links("n")
    assert len(pos) == n
    assert np.allclose(pos, 1 / n) and np.allclose(neg, (n - 1) / n)


def test_explicit_feedback_form(rr, cands):
    shown = cands[:3]
    out = rr.feedback(namespace="maya", query=QUERY, shown=shown, used=["price"], now=NOW,
                      feedback_id="turn-17")
    assert out.applied == ("lisbon", "seat", "price")
    imp = rr.state.get_impression(out.recall_id)
    assert imp.namespace == "maya" and imp.qtype == "when" and imp.ids == ("lisbon", "seat",
                                                                           "price")
    before = evidence(rr, "maya")
    again = rr.feedback(namespace="maya", query=QUERY, shown=shown, used=["price"], now=NOW,
                        feedback_id="turn-17")
    assert again.recall_id == out.recall_id  # the same feedback id names the same impression
    assert again.applied == () and evidence(rr, "maya") == before
    assert rr.state.read_docs("maya", ["price"]).use_count[0] == 1.0
    assert rr.state.read_docs("maya", ["price"]).last_used[0] == NOW


def test_explicit_feedback_needs_all_its_parts(rr, cands):
    with pytest.raises(InputError, match="pass recall_id, or namespace=, query= and shown="):
        rr.feedback(namespace="maya", query=QUERY, used=["lisbon"])
    with pytest.raises(FeedbackError, match="'zzz' is not among the shown ids"):
        rr.feedback(namespace="maya", query=QUERY, shown=cands[:2], used=["zzz"], now=NOW)
    assert rr.stats()["impressions"] == 0  # a refused explicit feedback leaves no impression
    with pytest.raises(InputError, match="namespace"):
        rr.feedback(namespace="", query=QUERY, shown=cands[:2], used=[], now=NOW)


def test_track_false_leaves_nothing_to_give_feedback_on(rr, cands):
    ranking = rr.rerank(QUERY, cands, k=2, now=NOW, track=False)
    with pytest.raises(FeedbackError, match="unknown"):
        rr.feedback(ranking.recall_id, used=ranking.ids[:1])


def test_explicit_now_on_feedback_wins(rr, cands):
    ranking = rr.rerank(QUERY, cands, namespace="maya", k=2, now=NOW)
    rr.feedback(ranking.recall_id, used=[ranking.ids[0]], now=NOW + 3600)
    assert rr.state.read_docs("maya", [ranking.ids[0]]).last_used[0] == NOW + 3600


# -------------------------------------------------------------------------------- links

def _teach(rr: Reranker, namespace: str, cands, rounds: int, used_id: str = "lisbon") -> None:
    for t in range(rounds):
        ranking = rr.rerank(QUERY, cands, namespace=namespace, k=3, now=NOW + t)
        rr.feedback(ranking.recall_id, used=[used_id] if used_id in ranking.ids else [])


def test_links_global_layer(rr, cands):
    assert rr.links() == []
    _teach(rr, "maya", cands, 5)
    links = rr.links("*")
    assert links and all(isinstance(link, Link) for link in links)
    assert [(-link.p, link.feature) for link in links] == sorted((-link.p, link.feature)
                                                                 for link in links)
    for link in links:
        assert 0 < link.low < link.p < link.high < 1
        assert link.n == pytest.approx(link.pos + link.neg)
    top = links[0].feature
    assert "fact" in top or "date:yes" in top or "num:yes" in top or "qent" in top
    cut = max(link.n for link in links)
    assert cut > min(link.n for link in links)
    strong = rr.links("*", min_n=cut)
    assert strong and all(link.n >= cut for link in strong) and len(strong) < len(links)
    wide = {link.feature: link for link in rr.links("*", level=0.99)}
    assert all(wide[link.feature].low <= link.low for link in links)


def test_links_of_a_namespace_borrow_the_pool(rr, cands):
    _teach(rr, "maya", cands, 30)  # maya teaches: the Lisbon fact is useful for "when"
    _teach(rr, "ben", cands, 1)  # ben has one feedback of his own
    ben = {link.feature: link for link in rr.links("ben")}
    alone = Reranker()
    _teach(alone, "ben", cands, 1)
    ben_alone = {link.feature: link for link in alone.links("ben")}
    assert set(ben) == set(ben_alone)  # the namespace lists its own links...
    assert ben["qt:when&kind:fact"].p > 2 * ben_alone["qt:when&kind:fact"].p  # ...pooled
    assert ben["qt:when&kind:fact"].n == ben_alone["qt:when&kind:fact"].n  # n is its own


def test_a_new_namespace_starts_from_what_others_taught(rr, cands):
    fresh = Reranker().rerank(QUERY, cands, namespace="zoe", k=4, now=NOW)
    _teach(rr, "maya", cands, 30)
    _teach(rr, "ben", cands, 30)
    assert rr.links("zoe") == []  # no evidence of its own
    borrowed = rr.rerank(QUERY, cands, namespace="zoe", k=4, now=NOW)
    u = {r.id: r.signals["usefulness"] for r in borrowed}
    u0 = {r.id: r.signals["usefulness"] for r in fresh}
    assert u["lisbon"] > u0["lisbon"]
    assert u["lisbon"] == max(u.values())
    lisbon = next(r for r in borrowed if r.id == "lisbon")
    assert max(p for _, p in lisbon.top_links) > rr.config.learning.prior.mean


def test_pooled_borrowing_is_capped_by_kappa(cands):
    rr = Reranker(config=Config(learning=Learning(prior=Prior(kappa=0.0))))
    _teach(rr, "maya", cands, 10)
    r = rr.rerank(QUERY, cands, namespace="zoe", k=4, now=NOW)
    assert len({x.signals["usefulness"] for x in r}) == 1  # kappa 0: nothing borrowed


@pytest.mark.parametrize("scrub", [True, False])
def test_forget_namespace(rr, cands, scrub):
    _teach(rr, "maya", cands, 3)
    _teach(rr, "ben", cands, 2)
    before = evidence(rr)
    rr.forget_namespace("maya", scrub_global=scrub)
    assert rr.links("maya") == []
    assert rr.state.namespaces() == ["ben"]
    assert np.isnan(rr.state.read_docs("maya", ["lisbon"]).last_used[0])
    after = evidence(rr)
    if scrub:  # the pool now holds exactly what ben taught
        ben = evidence(rr, "ben")
        assert after.keys() == before.keys()
        for f, (p, n) in after.items():
            assert (p, n) == pytest.approx(ben.get(f, (0.0, 0.0)), abs=1e-9)
    else:
        assert after == before
    with pytest.raises(InputError, match="namespace"):
        rr.forget_namespace("*")


def test_links_rejects_a_bad_namespace(rr):
    with pytest.raises(InputError, match="namespace"):
        rr.links("")


# ------------------------------------------------------------------------------ lifecycle

def test_reranker_over_sqlite_closes(tmp_path, cands):
    path = tmp_path / "rr.db"
    with Reranker(f"sqlite:///{path}") as rr:
        assert isinstance(rr.state, SQLiteState)
        rr.rerank(QUERY, cands, now=NOW)
        assert "SQLiteState" in repr(rr)
    with Reranker(SQLiteState(path)) as again:
        assert again.stats()["impressions"] == 1


def test_reranker_accepts_a_backend_instance():
    state = MemoryState()
    assert Reranker(state).state is state
    with pytest.raises(TypeError, match="state: expected a URL or a StateBackend"):
        Reranker(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- async

def test_arerank_and_afeedback(cands):
    rr = Reranker()

    async def flow():
        ranking = await rr.arerank(QUERY, cands, namespace="maya", k=2, now=NOW)
        out = await rr.afeedback(ranking.recall_id, used=[ranking.ids[0]], namespace="maya")
        explicit = await rr.afeedback(namespace="maya", query=QUERY, shown=cands[:2],
                                      used=["seat"], now=NOW, feedback_id="f1")
        return ranking, out, explicit

    ranking, out, explicit = asyncio.run(flow())
    assert ranking.ids == rr.rerank(QUERY, cands, namespace="ben", k=2, now=NOW).ids
    assert out.applied == tuple(ranking.ids)
    assert explicit.applied == ("lisbon", "seat")
    assert rr.stats()["feedbacks"] == 2


def test_async_errors_propagate(cands):
    rr = Reranker()

    async def bad():
        await rr.afeedback("no-such-recall", used=[])

    with pytest.raises(FeedbackError, match="unknown"):
        asyncio.run(bad())
    with pytest.raises(InputError, match="k: must be from 1 to 65535, got 0"):
        asyncio.run(rr.arerank(QUERY, cands, k=0))


def test_async_over_sqlite_runs_concurrently(tmp_path, cands):
    rr = Reranker(SQLiteState(tmp_path / "async.db"))

    async def many():
        rankings = await asyncio.gather(*(rr.arerank(QUERY, cands, namespace="n", k=2,
                                                     now=NOW + i) for i in range(8)))
        await asyncio.gather(*(rr.afeedback(r.recall_id, used=r.ids[:1]) for r in rankings))

    asyncio.run(many())
    assert rr.stats()["feedbacks"] == 8
    assert sum(rr.state.read_docs("n", [c["id"] for c in cands]).use_count) == 8
    rr.close()


class _Unreachable(MemoryState):
    """A state whose server is down: every read and write raises StateUnavailableError."""

    def read(self, namespace, features, ids):
        raise StateUnavailableError("connection refused")

    def put_impression(self, impression, *, feedback_id=None):
        raise StateUnavailableError("connection refused")


def test_an_unreachable_state_degrades_to_the_retriever_and_priors(cands, caplog):
    rr = Reranker(_Unreachable())
    with caplog.at_level("WARNING", logger="heaprank"):
        ranking = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    fresh = Reranker().rerank(QUERY, cands, namespace="maya", k=3, now=NOW, track=False)
    assert ranking.ids == fresh.ids  # no evidence anywhere: the same as an empty state
    assert all("state unavailable" in r.explain() for r in ranking)
    assert "state unavailable" in caplog.text
    with pytest.raises(StateUnavailableError):
        Reranker(_Unreachable(), strict=True).rerank(QUERY, cands, namespace="maya", now=NOW)


@pytest.mark.parametrize("bad", [4e12, 1e300, -1e12])
def test_an_implausible_now_is_refused_by_every_entry_point(cands, bad):
    rr = Reranker()
    with pytest.raises(InputError, match="now"):
        rr.rerank(QUERY, cands, namespace="maya", now=bad)
    ranking = rr.rerank(QUERY, cands, namespace="maya", k=2, now=NOW)
    for call in (lambda: rr.feedback(ranking.recall_id, used=[ranking.ids[0]], now=bad),
                 lambda: rr.mark_used(ranking.recall_id, [ranking.ids[0]], now=bad),
                 lambda: rr.mark_ignored(ranking.recall_id, [ranking.ids[1]], now=bad),
                 lambda: rr.feedback(namespace="maya", query=QUERY, shown=cands[:2],
                                     used=[], now=bad)):
        with pytest.raises(InputError, match="now"):
            call()
    assert rr.stats()["feedbacks"] == 0 and rr.stats()["impressions"] == 1
    out = rr.feedback(ranking.recall_id, used=[ranking.ids[0]], namespace="maya")  # still open
    assert out.applied == tuple(ranking.ids)


# ------------------------------------------------- the impressions a reranker stored, kept


class CountingSQLiteState(SQLiteState):
    """A real SQLite state that counts the impressions read back."""

    reads = 0

    def get_impression(self, recall_id):
        self.reads += 1
        return super().get_impression(recall_id)


def test_feedback_on_a_recall_of_this_reranker_reads_no_impression_back(tmp_path, cands):
    state = CountingSQLiteState(tmp_path / "s.db")
    rr = Reranker(state)
    first = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    second = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    rr.feedback(first.recall_id, used=[first.ids[0]], now=NOW)
    rr.feedback_many([(second.recall_id, [second.ids[1]])], now=NOW)
    assert state.reads == 0
    # another reranker on the same file reads it, and the learned counts are the same
    other = Reranker(CountingSQLiteState(tmp_path / "s.db"))
    third = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    other.feedback(third.recall_id, used=[third.ids[0]], now=NOW)
    assert other.state.reads == 1
    again = other.feedback(third.recall_id, used=[third.ids[0]], now=NOW)
    assert again.applied == ()  # idempotent either way: the state holds the verdicts


def test_a_kept_impression_never_outlives_its_recall_or_crosses_namespaces(tmp_path, cands):
    rr = Reranker(SQLiteState(tmp_path / "s.db"))
    ranking = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    with pytest.raises(FeedbackError, match="unknown"):
        rr.feedback(ranking.recall_id, used=[ranking.ids[0]], namespace="ben", now=NOW)
    rr.state.forget_namespace("maya")  # behind the reranker's back: the state is the judge
    with pytest.raises(FeedbackError, match="unknown"):
        rr.feedback(ranking.recall_id, used=[ranking.ids[0]], now=NOW)
    assert "maya" not in rr.state.namespaces()  # the refused feedback wrote nothing
    kept = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    rr.forget_namespace("maya")
    assert not rr._impressions._stored  # nothing of it stays here
    with pytest.raises(FeedbackError, match="unknown"):
        rr.feedback(kept.recall_id, used=[kept.ids[0]], now=NOW)


@pytest.mark.parametrize("state", [":memory:", None])
def test_the_kept_impressions_are_bounded_and_dropped_once_fed(cands, state):
    from heaprank.learning.impressions import KEPT_RECALLS as MEANS_ENTRIES

    rr = Reranker(None if state is None else SQLiteState(state))
    for _ in range(MEANS_ENTRIES + 50):
        last = rr.rerank(QUERY, cands, namespace="maya", k=2, now=NOW)
    assert len(rr._impressions._stored) == MEANS_ENTRIES
    rr.feedback(last.recall_id, used=[last.ids[0]])  # its verdicts moved on: the copy goes
    assert last.recall_id not in rr._impressions._stored


def test_a_kept_impression_expires(tmp_path, cands, monkeypatch):
    import heaprank.learning.impressions as reranker_module

    state = CountingSQLiteState(tmp_path / "s.db")
    rr = Reranker(state)
    old = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    monkeypatch.setattr(reranker_module, "KEPT_IMPRESSION_S", -1.0)  # everything kept is stale
    rr.feedback(old.recall_id, used=[old.ids[0]], now=NOW)
    assert state.reads == 1  # read from the state, which holds it as long as its own TTL
    newer = rr.rerank(QUERY, cands, namespace="maya", k=3, now=NOW)
    assert list(rr._impressions._stored) == [newer.recall_id]  # the stale ones dropped on the way in


def test_first_stage_slots_name_the_rank_and_the_gap_on_any_scale():
    """Config(features=Features(stage_slots=True)): rank:/gap: slots from the first stage's
    order, crossed with the question type; an affine change of the scores gives the same slots."""
    cands = [{"id": f"d{i}", "text": "a note", "score": s} for i, s in
             enumerate([0.2, 9.0, 8.5, 1.0, 0.0])]
    rr = Reranker(config=Config(features=Features(stage_slots=True)))
    moved = [{**c, "score": -3.0 + 0.001 * c["score"]} for c in cands]
    rows = []
    for given in (cands, moved):
        ranking = rr.rerank(QUERY, given, namespace="n", k=5, now=NOW)
        imp = rr.state.get_impression(ranking.recall_id)
        rows.append({d: f for d, f in zip(imp.ids, imp.features)})
        assert all(len(f) == 28 for f in imp.features)  # (with the person slot: "my")
    assert rows[0] == rows[1]
    got = rows[0]
    assert {"rank:1", "gap:0", "qt:when&rank:1"} <= set(got["d1"])
    assert {"rank:2", "gap:<=0.1"} <= set(got["d2"])
    assert {"rank:3-5", "gap:>0.5"} <= set(got["d0"]) and "gap:>0.5" in got["d4"]
