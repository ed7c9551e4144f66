"""One conformance suite, run against every state backend (memory, and SQLite in a real file)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heaprank import FeedbackError, MemoryState, Prior, Reranker, SQLiteState, StateBackend
from heaprank import links as linkmath
from heaprank.state import open_state
from heaprank.state.base import FeedbackBatch, FeedbackItem, Impression

BACKENDS = ["memory", "sqlite"]
NOW = 1_750_000_000.0
FEATURES_A = ("kind:fact", "len:<=3", "qt:when&kind:fact")
FEATURES_B = ("kind:note", "len:<=3", "qt:when&kind:note")
#: The prior every credit below uses, pinned so the exact EM-credit checks never follow a
#: retuned default.
PRIOR = Prior(mean=0.02, strength=2.0, kappa=50.0)


@pytest.fixture(params=BACKENDS)
def make_backend(request, tmp_path):
    """A factory of fresh backends of one kind (keyword options pass through)."""
    opened: list[StateBackend] = []

    def make(**options) -> StateBackend:
        if request.param == "memory":
            state = MemoryState(**options)
        else:
            state = SQLiteState(tmp_path / f"state{len(opened)}.db", **options)
        opened.append(state)
        return state

    yield make
    for state in opened:
        state.close()


@pytest.fixture()
def backend(make_backend) -> StateBackend:
    return make_backend()


def credit(read, items):
    return linkmath.credit(read, items, PRIOR)


def impression(recall_id="r1", namespace="ns", ids=("a", "b"), features=(FEATURES_A, FEATURES_B),
               time=NOW, explicit=True, query="When is it?") -> Impression:
    return Impression(recall_id=recall_id, namespace=namespace, query=query, qtype="when",
                      time=time, time_explicit=explicit, ids=tuple(ids),
                      features=tuple(features), signal_names=("relevance", "usefulness"),
                      signals=tuple((1.0, 0.25) for _ in ids))


def batch(recall_id="r1", namespace="ns", verdicts=(("a", True), ("b", False)), time=NOW,
          features=None) -> FeedbackBatch:
    features = features or {"a": FEATURES_A, "b": FEATURES_B, "c": FEATURES_A}
    items = tuple(FeedbackItem(id=i, rank=rank, used=used, features=features[i])
                  for rank, (i, used) in enumerate(verdicts, start=1))
    return FeedbackBatch(recall_id=recall_id, namespace=namespace, time=time, items=items)


def snapshot(state: StateBackend):
    out = {}
    for ns in [None, *state.namespaces()]:
        f, p, n = state.list_links(ns)
        out[ns] = (f, p.tolist(), n.tolist())
    return out


# ------------------------------------------------------------------------------------ reads

def test_backend_satisfies_the_protocol(backend):
    assert isinstance(backend, StateBackend)


def test_read_links_of_unknown_features_gives_zeros(backend):
    counts = backend.read_links("nobody", ["kind:fact", "never:seen", "qt:who&ent:yes"])
    for arr in (counts.pos, counts.neg, counts.gpos, counts.gneg):
        assert arr.dtype == np.float64 and arr.shape == (3,)
        assert np.all(arr == 0.0)
    empty = backend.read_links("nobody", [])
    assert empty.pos.shape == (0,) and empty.gneg.shape == (0,)


def test_read_docs_of_unknown_ids_is_never_used(backend):
    docs = backend.read_docs("nobody", ["x", "y"])
    assert np.all(np.isnan(docs.last_used))
    assert docs.use_count.tolist() == [0.0, 0.0] and docs.ignore_count.tolist() == [0.0, 0.0]


def test_read_links_follows_the_requested_order_and_duplicates(backend):
    backend.put_impression(impression())
    backend.apply_feedback(batch(), credit)
    counts = backend.read_links("ns", ["kind:note", "kind:fact", "kind:note"])
    assert counts.neg[0] == counts.neg[2] == 1.0
    assert counts.pos[1] + counts.neg[1] == pytest.approx(1.0)


# ------------------------------------------------------------------------------ impressions

def test_impressions_round_trip(backend):
    imp = impression(recall_id="r-ü", query="Когда рейс в Лиссабон? 3月14日", time=NOW + 0.25,
                     explicit=False)
    backend.put_impression(imp)
    got = backend.get_impression("r-ü")
    assert got is not None
    assert got.recall_id == "r-ü" and got.namespace == "ns"
    assert got.query == imp.query and got.qtype == "when"
    assert got.time == NOW + 0.25 and got.time_explicit is False
    assert got.ids == ("a", "b") and got.features == (FEATURES_A, FEATURES_B)
    assert got.signal_names == imp.signal_names and got.signals == imp.signals
    assert got.resolved == {}
    assert backend.get_impression("r-unknown") is None


def test_impression_records_its_resolutions(backend):
    backend.put_impression(impression())
    backend.apply_feedback(batch(verdicts=(("a", True),)), credit)
    assert backend.get_impression("r1").resolved == {"a": True}
    backend.apply_feedback(batch(verdicts=(("b", False),)), credit)
    assert backend.get_impression("r1").resolved == {"a": True, "b": False}


def test_time_explicit_round_trips_true(backend):
    backend.put_impression(impression(explicit=True))
    assert backend.get_impression("r1").time_explicit is True


# --------------------------------------------------------------------------------- feedback

def test_apply_feedback_adds_one_unit_of_evidence_per_feature_and_item(backend):
    backend.put_impression(impression())
    out = backend.apply_feedback(batch(), credit)
    assert out.applied == ("a", "b") and out.already_recorded == ()
    features, pos, neg = backend.list_links("ns")
    total = dict(zip(features, (pos + neg).tolist(), strict=False))
    assert total == pytest.approx({"kind:fact": 1.0, "kind:note": 1.0, "len:<=3": 2.0,
                                   "qt:when&kind:fact": 1.0, "qt:when&kind:note": 1.0})
    counts = backend.read_links("ns", ["kind:note"])
    assert counts.pos[0] == 0.0 and counts.neg[0] == 1.0  # rejected: all negative
    # EM credit with equal priors: each of the used item's 3 links gets min(1, p / U).
    p = PRIOR.mean
    u = 1 - (1 - p) ** 3
    assert backend.read_links("ns", ["kind:fact"]).pos[0] == pytest.approx(p / u, rel=1e-12)


def test_apply_feedback_is_idempotent_per_recall_and_item(backend):
    backend.put_impression(impression())
    backend.apply_feedback(batch(), credit)
    before, stats = snapshot(backend), backend.stats()
    docs = backend.read_docs("ns", ["a", "b"])
    again = backend.apply_feedback(batch(), credit)
    assert again.applied == () and again.already_recorded == ("a", "b")
    assert snapshot(backend) == before
    assert backend.stats() == stats
    docs2 = backend.read_docs("ns", ["a", "b"])
    assert docs2.use_count.tolist() == docs.use_count.tolist()
    assert docs2.ignore_count.tolist() == docs.ignore_count.tolist()


def test_partially_repeated_feedback_applies_only_the_new_items(backend):
    backend.put_impression(impression(ids=("a", "b", "c"), features=(FEATURES_A, FEATURES_B,
                                                                     FEATURES_A)))
    backend.apply_feedback(batch(verdicts=(("a", True),)), credit)
    out = backend.apply_feedback(batch(verdicts=(("a", True), ("c", False))), credit)
    assert out.applied == ("c",) and out.already_recorded == ("a",)
    assert backend.read_docs("ns", ["a"]).use_count[0] == 1.0
    assert backend.stats()["feedbacks"] == 2


def test_conflicting_feedback_raises_and_changes_nothing(backend):
    backend.put_impression(impression(ids=("a", "b", "c"), features=(FEATURES_A, FEATURES_B,
                                                                     FEATURES_A)))
    backend.apply_feedback(batch(verdicts=(("a", True),)), credit)
    before, stats = snapshot(backend), backend.stats()
    with pytest.raises(FeedbackError, match="'a' was already recorded as used"):
        backend.apply_feedback(batch(verdicts=(("c", True), ("a", False))), credit)
    assert snapshot(backend) == before and backend.stats() == stats
    assert backend.get_impression("r1").resolved == {"a": True}  # "c" was not applied either


def test_doc_stats_update(backend):
    backend.put_impression(impression())
    backend.apply_feedback(batch(time=NOW + 10), credit)
    docs = backend.read_docs("ns", ["a", "b", "zzz"])
    assert docs.last_used[0] == NOW + 10 and math.isnan(docs.last_used[1])
    assert docs.use_count.tolist() == [1.0, 0.0, 0.0]
    assert docs.ignore_count.tolist() == [0.0, 1.0, 0.0]
    # A later feedback stamped earlier never moves last_used back.
    backend.put_impression(impression(recall_id="r2"))
    backend.apply_feedback(batch(recall_id="r2", verdicts=(("a", True), ("b", False)), time=NOW),
                           credit)
    backend.put_impression(impression(recall_id="r3"))
    backend.apply_feedback(batch(recall_id="r3", verdicts=(("b", True), ("a", False)),
                                 time=NOW + 20), credit)
    docs = backend.read_docs("ns", ["a", "b"])
    assert docs.last_used.tolist() == [NOW + 10, NOW + 20]
    assert docs.use_count.tolist() == [2.0, 1.0]
    assert docs.ignore_count.tolist() == [1.0, 2.0]
    assert backend.read_docs("other", ["a"]).use_count[0] == 0.0  # per namespace


def test_list_links_and_the_global_layer(backend):
    for rid, ns in (("r1", "ns"), ("r2", "other")):
        backend.put_impression(impression(recall_id=rid, namespace=ns))
        backend.apply_feedback(batch(recall_id=rid, namespace=ns), credit)
    features, pos, neg = backend.list_links("ns")
    assert features == sorted(set(FEATURES_A) | set(FEATURES_B))
    other_features, opos, oneg = backend.list_links("other")
    assert other_features == features
    gf, gpos, gneg = backend.list_links(None)
    assert gf == features  # the pool is the sum over namespaces
    np.testing.assert_allclose(gpos, pos + opos, rtol=1e-12)
    np.testing.assert_allclose(gneg, neg + oneg, rtol=1e-12)
    # "other" borrowed what "ns" taught, so its EM credit differs: the pool is not 2 x "ns".
    assert not np.allclose(opos, pos)
    assert backend.list_links("nobody")[0] == []
    counts = backend.read_links("ns", features)
    np.testing.assert_allclose(counts.gpos, gpos, rtol=1e-12)


def test_namespaces(backend):
    assert backend.namespaces() == []
    for rid, ns in (("r1", "zeta"), ("r2", "alpha"), ("r3", "zeta")):
        backend.put_impression(impression(recall_id=rid, namespace=ns))
        backend.apply_feedback(batch(recall_id=rid, namespace=ns), credit)
    assert backend.namespaces() == ["alpha", "zeta"]


@pytest.mark.parametrize("scrub", [True, False])
def test_forget_namespace(backend, scrub):
    for rid, ns in (("r1", "keep"), ("r2", "gone"), ("r3", "gone")):
        backend.put_impression(impression(recall_id=rid, namespace=ns))
        backend.apply_feedback(batch(recall_id=rid, namespace=ns), credit)
    _, kpos, kneg = backend.list_links("keep")
    _, gpos_before, gneg_before = backend.list_links(None)
    backend.forget_namespace("gone", scrub_global=scrub)
    assert backend.namespaces() == ["keep"]
    assert backend.list_links("gone")[0] == []
    assert backend.read_docs("gone", ["a"]).use_count[0] == 0.0
    assert backend.get_impression("r2") is None and backend.get_impression("r3") is None
    assert backend.get_impression("r1") is not None
    _, gpos, gneg = backend.list_links(None)
    if scrub:  # the pool holds only what "keep" taught
        np.testing.assert_allclose(gpos, kpos, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gneg, kneg, rtol=1e-12, atol=1e-12)
    else:
        assert gpos.tolist() == gpos_before.tolist() and gneg.tolist() == gneg_before.tolist()
    # The namespace can start again from scratch.
    backend.put_impression(impression(recall_id="r4", namespace="gone"))
    assert backend.apply_feedback(batch(recall_id="r4", namespace="gone"), credit).applied


def test_stats(backend):
    assert backend.stats() == {"namespaces": 0, "links": 0, "global_links": 0, "documents": 0,
                               "impressions": 0, "feedbacks": 0}
    for rid, ns in (("r1", "ns"), ("r2", "other")):
        backend.put_impression(impression(recall_id=rid, namespace=ns))
        backend.apply_feedback(batch(recall_id=rid, namespace=ns), credit)
    backend.put_impression(impression(recall_id="r3"))
    assert backend.stats() == {"namespaces": 2, "links": 10, "global_links": 5, "documents": 4,
                               "impressions": 3, "feedbacks": 2}


# ---------------------------------------------------------------------------------- pruning

def test_pruning_drops_the_oldest_impressions(make_backend):
    state = make_backend(max_impressions=10)
    for i in range(600):
        state.put_impression(impression(recall_id=f"r{i}"))
    assert state.get_impression("r0") is None
    for i in range(590, 600):  # the newest max_impressions are always kept
        assert state.get_impression(f"r{i}") is not None
    # Pruning may be lazy (batched), but the log stays bounded well below what was written.
    assert 10 <= state.stats()["impressions"] < 600
    rr = Reranker(state)
    with pytest.raises(FeedbackError, match="unknown"):
        rr.feedback("r0", used=["a"])


def test_an_impression_survives_500_later_recalls_by_default(make_backend):
    rr = Reranker(make_backend())
    cands = [{"id": f"m{i}", "text": f"Note {i} from Monday", "score": float(i)} for i in range(4)]
    first = rr.rerank("When was it?", cands, namespace="ns", k=3, now=NOW)
    for t in range(500):
        rr.rerank("When was it?", cands, namespace="ns", k=3, now=NOW + t)
    out = rr.feedback(first.recall_id, used=[first.ids[0]])
    assert out.applied == tuple(first.ids)
    assert rr.stats()["impressions"] == 501


# ------------------------------------------------------------------------ through Reranker

def _same_feedback(rr: Reranker) -> None:
    cands = [
        {"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3,
         "metadata": {"kind": "fact", "created_at": NOW - 86_400 * 20}},
        {"id": "seat", "text": "I prefer window seats", "score": 5.1,
         "metadata": {"kind": "preference", "source": "maya"}},
        {"id": "price", "text": "Flights usually cost $400", "score": 6.0,
         "metadata": {"kind": "tool_result"}},
        {"id": "chat", "text": "ok", "score": 1.0},
    ]
    plan = [("maya", "When is my flight to Lisbon?", ["lisbon"]),
            ("maya", "What seat do I like?", ["seat"]),
            ("ben", "How much are flights?", ["price", "lisbon"]),
            ("ben", "Who is Maya?", []),
            ("zoe", "When do I leave?", ["lisbon"])]
    for t, (ns, query, used) in enumerate(plan * 3):
        ranking = rr.rerank(query, cands, namespace=ns, k=3, now=NOW + 60 * t)
        rr.feedback(ranking.recall_id, used=[u for u in used if u in ranking.ids])
    rr.forget_namespace("zoe", scrub_global=False)


def test_reranker_links_agree_between_memory_and_sqlite_file(tmp_path):
    memory = Reranker()
    sqlite = Reranker(f"sqlite:///{tmp_path / 'links.db'}")
    try:
        assert isinstance(sqlite.state, SQLiteState)
        _same_feedback(memory)
        _same_feedback(sqlite)
        for ns in ("*", "maya", "ben", "zoe", "new"):
            assert memory.links(ns) == sqlite.links(ns)
        assert memory.links("*")  # not vacuous
        assert memory.stats() == sqlite.stats()
    finally:
        sqlite.close()


@pytest.mark.parametrize("url", ["memory://", None])
def test_open_state_memory_urls(url):
    assert isinstance(open_state(url), MemoryState)


def test_open_state_sqlite_url_absolute_path(tmp_path):
    path = tmp_path / "sub" / "x.db"
    state = open_state(f"sqlite:///{path}")
    try:
        assert isinstance(state, SQLiteState) and state.path == str(path)
        assert path.exists() and state.integrity_check() == "ok"
    finally:
        state.close()


def test_an_impression_written_twice_keeps_the_first(backend):
    backend.put_impression(impression(ids=("a", "b")))
    backend.put_impression(impression(ids=("c",), features=(FEATURES_A,)))
    assert backend.get_impression("r1").ids == ("a", "b")
