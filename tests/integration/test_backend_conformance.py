"""One conformance suite, run against every state backend (memory, SQLite in a real file, Redis
on the shared server and on a local 3-master Cluster started for the session, and PostgreSQL in
a schema of its own on the real server)."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest

from heaprank import (
    Config,
    CoUse,
    FeedbackError,
    Learning,
    MemoryState,
    Prior,
    Refit,
    Reranker,
    SQLiteState,
    StateBackend,
)
from heaprank.records import IGNORED, USED, EdgeChange, Impression, Update
from heaprank.state import codec, open_state
from tests.integration.redis_servers import unique_prefix

BACKENDS = ["memory", "sqlite", "redis", "redis-cluster", "postgres"]
NOW = 1_750_000_000.0
FEATURES_A = ("kind:fact", "len:<=3", "qt:when&kind:fact", "qt:when&len:<=3")
FEATURES_B = ("kind:note", "len:<=3", "qt:when&kind:note", "qt:when&len:<=3")
#: The prior every credit below uses, pinned so the exact EM-credit checks never follow a
#: retuned default.
PRIOR = Prior(mean=0.02, strength=2.0, kappa=50.0)


@pytest.fixture(params=BACKENDS)
def make_backend(request, tmp_path):
    """A factory of fresh backends of one kind (keyword options pass through)."""
    opened: list[StateBackend] = []
    schemas: list[str] = []

    def make(**options) -> StateBackend:
        if request.param == "memory":
            state = MemoryState(**options)
        elif request.param == "sqlite":
            state = SQLiteState(tmp_path / f"state{len(opened)}.db", **options)
        elif request.param == "postgres":
            from heaprank.state.postgres import PostgresState
            from tests.postgres_server import unique_schema

            schema = unique_schema()
            schemas.append(schema)
            state = PostgresState(request.getfixturevalue("postgres_url"), schema=schema,
                                  **options)
        else:
            from heaprank.state.redis import RedisState

            url = request.getfixturevalue("redis_url" if request.param == "redis"
                                          else "redis_cluster_url")
            state = RedisState(url, prefix=unique_prefix(), **options)
        opened.append(state)
        return state

    yield make
    for state in opened:
        if hasattr(state, "clear"):
            state.clear()
        state.close()
    if schemas:
        from tests.postgres_server import drop_schema

        for schema in schemas:
            drop_schema(request.getfixturevalue("postgres_url"), schema)


@pytest.fixture()
def backend(make_backend) -> StateBackend:
    return make_backend()


#: The learning settings of the feedback below: the pinned prior, every ignored item rejected
#: with weight 1, no re-fit (the state holds only what feedback taught).
CONFIG = Config(learning=Learning(prior=PRIOR, reject_discount="none"), refit=Refit(every=0))


def feed(backend, recall_id=None, namespace="ns", used=("a",), time=NOW, config=CONFIG):
    """One feedback through the learning path on ``backend``: ``used`` used, every other shown
    item ignored (the outcome names every shown id)."""
    return Reranker(backend, config=config).feedback(recall_id or R1, used=list(used),
                                                     namespace=namespace, now=time)


def mark(backend, recall_id=None, used=(), ignored=(), time=NOW):
    """Verdicts on some shown items of a recall; the rest stays open."""
    rr = Reranker(backend, config=CONFIG)
    if used:
        rr.mark_used(recall_id or R1, list(used), now=time)
    if ignored:
        rr.mark_ignored(recall_id or R1, list(ignored), now=time)


def update(recall_id=None, namespace="ns", ranks=(1, 2), codes=(USED, IGNORED), used=("a",),
           increments=None, time=NOW, edges=None) -> Update:
    """A feedback update as learning hands it to a state: by default ``a`` used and ``b``
    ignored, with round increments (used: ``pos`` 0.25 on each of FEATURES_A; ignored: ``neg``
    1 on each of FEATURES_B)."""
    if increments is None:
        increments = {**{f: (0.25, 0.75) for f in FEATURES_A}, **{f: (0.0, 1.0) for f in FEATURES_B}}
        increments["len:<=3"] = (0.25, 1.75)
        increments["qt:when&len:<=3"] = (0.25, 1.75)
    features = tuple(sorted(increments))
    return Update(recall_id or R1, namespace, time, tuple(ranks), tuple(codes), tuple(used),
                  features, np.array([increments[f][0] for f in features]),
                  np.array([increments[f][1] for f in features]), edges)


def _rel(backend) -> float:
    """Redis keeps a namespace's counts as float32 (about 7 significant digits)."""
    return 1e-6 if type(backend).__name__ == "RedisState" else 1e-12


def rid(n: int) -> str:
    """A well-formed recall id made now (distinct per ``n``)."""
    return f"{(int(time.time() * 1000) << 20) | n:016x}"


R1, R2, R3, R4 = rid(1), rid(2), rid(3), rid(4)
SLOTS_A = ("kind:fact", "len:<=3")
SLOTS_B = ("kind:note", "len:<=3")


def impression(recall_id=R1, namespace="ns", ids=("a", "b"), slots=(SLOTS_A, SLOTS_B),
               time=NOW, explicit=True) -> Impression:
    return Impression(recall_id=recall_id, namespace=namespace, qtype="when",
                      time=time, time_explicit=explicit, ids=tuple(ids),
                      slots=tuple(slots), signal_names=("relevance", "usefulness"),
                      signals=tuple((1.0, 0.25) for _ in ids))


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
    assert docs.use_count.tolist() == [0.0, 0.0]


def test_read_links_follows_the_requested_order_and_duplicates(backend):
    backend.put_impression(impression())
    assert backend.apply([update()]) == [True]
    counts = backend.read_links("ns", ["kind:note", "kind:fact", "kind:note"])
    assert counts.neg[0] == counts.neg[2] == 1.0
    assert counts.pos[1] + counts.neg[1] == pytest.approx(1.0)


def test_a_read_counts_the_namespaces_holding_each_pooled_feature(backend):
    """``LinkCounts.holders``: how many namespaces hold a link of each feature (what the
    pooled prior's k-anonymity reads), 0 for a feature nobody holds; a forget takes its
    namespace out of the count."""
    for n, (rid_, ns) in enumerate(((R1, "ns"), (R2, "other"), (R3, "third"))):
        backend.put_impression(impression(recall_id=rid_, namespace=ns))
        inc = {"kind:fact": (0.5, 0.5), f"kind:custom{min(n, 1)}": (0.5, 0.5)}
        assert backend.apply([update(recall_id=rid_, namespace=ns, ranks=(1,), codes=(USED,),
                                     increments=inc)]) == [True]
    asked = ["kind:fact", "kind:custom0", "kind:custom1", "never:seen", "kind:fact"]
    for reader in ("ns", "nobody"):
        assert backend.read_links(reader, asked).holders.tolist() == [3.0, 1.0, 2.0, 0.0, 3.0]
        assert backend.read(reader, asked, ["a"])[0].holders.tolist() == [3.0, 1.0, 2.0, 0.0, 3.0]
    before = backend.read_links("ns", asked)
    backend.forget_namespace("other")  # (a Cluster client's own waiting deltas settled too)
    after = backend.read_links("ns", asked)
    assert after.holders.tolist() == [2.0, 1.0, 1.0, 0.0, 2.0]
    assert after.gpos[0] + after.gneg[0] == pytest.approx(before.gpos[0] + before.gneg[0] - 1.0)


# ------------------------------------------------------------------------------ impressions

def test_impressions_round_trip(backend):
    imp = impression(recall_id=R2, ids=("a", "Лиссабон-3月14日"), time=NOW + 0.25, explicit=False,
                     slots=(SLOTS_A, ("kind:секрет", "source:zoë@example.com", "len:<=3")))
    assert backend.put_impression(imp) == R2
    got = backend.get_impression(R2)
    assert got is not None
    assert got.recall_id == R2 and got.namespace == "ns" and got.qtype == "when"
    assert got.time == NOW + 0.25 and got.time_explicit is False
    assert got.ids == imp.ids and got.slots == imp.slots
    assert got.features == (FEATURES_A[:2] + FEATURES_A[2:],
                            ("kind:секрет", "source:zoë@example.com", "len:<=3",
                             "qt:when&kind:секрет", "qt:when&source:zoë@example.com",
                             "qt:when&len:<=3"))
    assert got.signal_names == imp.signal_names and got.signals == imp.signals
    assert got.resolved == {}
    assert backend.get_impression(R3) is None
    assert backend.get_impression("not-a-recall-id") is None


def test_impression_records_its_resolutions(backend):
    backend.put_impression(impression())
    assert backend.apply([update(ranks=(1,), codes=(USED,))]) == [True]
    assert backend.get_impression(R1).resolved == {"a": True}
    assert backend.apply([update(ranks=(2,), codes=(IGNORED,), used=())]) == [True]
    assert backend.get_impression(R1).resolved == {"a": True, "b": False}


def test_time_explicit_round_trips_true(backend):
    backend.put_impression(impression(explicit=True))
    assert backend.get_impression(R1).time_explicit is True


def test_an_impression_stays_compact(backend):
    """Ten shown items with ordinary slots: per item its id with a length byte, a count byte and
    a byte per slot, five float32 signals; and a header of ~30 bytes."""
    slots = ("kind:fact", "source:none", "len:<=10", "date:yes", "num:no", "ent:yes", "q:no",
             "qsrc:no", "qent:yes", "prev:top1", "next:none")
    imp = Impression(recall_id=R1, namespace="ns", qtype="when", time=NOW, time_explicit=True,
                     ids=tuple(f"conv-26/D{i}:1{i}" for i in range(10)), slots=(slots,) * 10,
                     signal_names=("relevance", "age_days", "importance", "usefulness", "rules"),
                     signals=((0.5, 3.0, 1.0, 0.25, 1.0),) * 10,  # exact in float32
                     verdicts=(0,) * 10)
    body = codec.encode_impression(imp)
    assert len(body) <= 10 * (1 + 13 + 1 + 11 + 5 * 4) + 32
    assert codec.decode_impression(R1, "ns", body) == imp


def test_feedback_log_yields_impressions_with_feedback_oldest_recall_first(backend):
    # "ns:b" shares "ns" as a prefix: a key layout that joins names with ":" must still tell
    # them apart.
    for r, ns in ((R1, "ns"), (R2, "ns:b"), (R3, "ns"), (R4, "ns")):
        backend.put_impression(impression(recall_id=r, namespace=ns))
    mark(backend, R3, ignored=["b"])  # first fed
    feed(backend, R1)
    feed(backend, R2, namespace="ns:b")  # R4: no feedback
    assert [i.recall_id for i in backend.feedback_log()] == [R1, R2, R3]
    assert [i.recall_id for i in backend.feedback_log(None)] == [R1, R2, R3]
    assert [i.recall_id for i in backend.feedback_log("ns")] == [R1, R3]
    assert [i.recall_id for i in backend.feedback_log("ns:b")] == [R2]
    assert list(backend.feedback_log("nobody")) == []
    first, third = backend.feedback_log("ns")
    assert first == replace(impression(), verdicts=(codec.USED, codec.IGNORED))
    assert third.verdicts == (codec.OPEN, codec.IGNORED) and third.namespace == "ns"
    backend.forget_namespace("ns")
    assert [i.recall_id for i in backend.feedback_log()] == [R2]


def test_feedback_log_reads_in_pages(backend, monkeypatch):
    """Pages of two (ties of age included: the ids below share their millisecond)."""
    from heaprank.state.postgres import backend as postgres_module
    from heaprank.state.redis import admin as redis_module
    from heaprank.state.sqlite import backend as sqlite_module
    monkeypatch.setattr(sqlite_module, "_LOG_PAGE", 2)
    monkeypatch.setattr(redis_module, "_LOG_PAGE", 2)
    monkeypatch.setattr(postgres_module, "_LOG_PAGE", 2)
    ids = [rid(10 + n) for n in range(7)]
    for n, r in enumerate(ids):
        backend.put_impression(impression(recall_id=r, namespace=f"ns{n % 2}"))
        feed(backend, r, namespace=f"ns{n % 2}")
    assert [i.recall_id for i in backend.feedback_log()] == ids
    assert [i.recall_id for i in backend.feedback_log("ns1")] == ids[1::2]


# --------------------------------------------------------------------------------- feedback

def test_apply_adds_the_increments_to_the_namespace_and_the_pool(backend):
    backend.put_impression(impression())
    assert backend.apply([update()]) == [True]
    features, pos, neg = backend.list_links("ns")
    want = update()
    assert features == list(want.features)
    np.testing.assert_allclose(pos, want.dpos, rtol=_rel(backend))
    np.testing.assert_allclose(neg, want.dneg, rtol=_rel(backend))
    pooled = backend.list_links(None)
    assert pooled[0] == features
    np.testing.assert_allclose(pooled[1], want.dpos, rtol=_rel(backend))
    assert backend.get_impression(R1).resolved == {"a": True, "b": False}
    assert backend.read_docs("ns", ["a", "b"]).use_count.tolist() == [1.0, 0.0]
    assert backend.stats()["feedbacks"] == 1


def test_a_document_feature_stays_out_of_the_pool(backend):
    backend.put_impression(impression())
    inc = {"kind:fact": (1.0, 0.0), "doc:a": (1.0, 0.0)}
    assert backend.apply([update(ranks=(1,), codes=(USED,), increments=inc)]) == [True]
    assert backend.list_links("ns")[0] == ["doc:a", "kind:fact"]
    assert backend.list_links(None)[0] == ["kind:fact"]
    assert backend.read_links("ns", ["doc:a"]).gpos.tolist() == [0.0]


def test_an_update_on_a_recorded_position_is_stale_and_writes_nothing(backend):
    backend.put_impression(impression())
    assert backend.apply([update(ranks=(1,), codes=(USED,))]) == [True]
    before, stats = snapshot(backend), backend.stats()
    docs = backend.read_docs("ns", ["a", "b"])
    assert backend.apply([update()]) == [False]  # rank 1 is recorded already
    assert snapshot(backend) == before and backend.stats() == stats
    assert backend.read_docs("ns", ["a", "b"]).use_count.tolist() == docs.use_count.tolist()
    assert backend.get_impression(R1).resolved == {"a": True}


def test_an_update_of_an_unknown_recall_or_another_namespace_is_stale(backend):
    backend.put_impression(impression(namespace="alice"))
    assert backend.apply([update(namespace="bob"), update(recall_id=R2, namespace="alice"),
                          update(recall_id="not-a-recall-id", namespace="alice")]) == [False] * 3
    assert backend.list_links("bob")[0] == [] and backend.list_links(None)[0] == []
    assert backend.get_impression(R1).resolved == {}


def test_apply_takes_a_list_and_skips_only_the_stale(backend):
    for r in (R1, R2):
        backend.put_impression(impression(recall_id=r))
    assert backend.apply([update(R1), update(R2), update(R1)]) == [True, True, False]
    _, pos, _ = backend.list_links("ns")
    np.testing.assert_allclose(pos, 2 * update().dpos, rtol=_rel(backend))
    assert backend.stats()["feedbacks"] == 2


# ------------------------------------------------------------------- through learning

def test_feedback_adds_one_unit_of_evidence_per_feature_and_item(backend):
    backend.put_impression(impression())
    out = feed(backend)
    assert out.applied == ("a", "b") and out.already_recorded == ()
    features, pos, neg = backend.list_links("ns")
    total = dict(zip(features, (pos + neg).tolist(), strict=False))
    assert total == pytest.approx({"kind:fact": 1.0, "kind:note": 1.0, "len:<=3": 2.0,
                                   "qt:when&kind:fact": 1.0, "qt:when&kind:note": 1.0,
                                   "qt:when&len:<=3": 2.0})
    counts = backend.read_links("ns", ["kind:note"])
    assert counts.pos[0] == 0.0 and counts.neg[0] == 1.0  # rejected: all negative
    # EM credit with equal priors: each of the used item's 4 links gets min(1, p / U).
    p = PRIOR.mean
    u = 1 - (1 - p) ** 4
    assert backend.read_links("ns", ["kind:fact"]).pos[0] == pytest.approx(p / u, rel=_rel(backend))


def test_feedback_is_idempotent_per_recall_and_item(backend):
    backend.put_impression(impression())
    feed(backend)
    before, stats = snapshot(backend), backend.stats()
    docs = backend.read_docs("ns", ["a", "b"])
    again = feed(backend)
    assert again.applied == () and again.already_recorded == ("a", "b")
    assert snapshot(backend) == before
    assert backend.stats() == stats
    docs2 = backend.read_docs("ns", ["a", "b"])
    assert docs2.use_count.tolist() == docs.use_count.tolist()


def test_partially_repeated_feedback_applies_only_the_new_items(backend):
    backend.put_impression(impression(ids=("a", "b", "c"), slots=(SLOTS_A, SLOTS_B, SLOTS_A)))
    mark(backend, used=["a"])
    out = feed(backend)
    assert out.applied == ("b", "c") and out.already_recorded == ("a",)
    assert backend.read_docs("ns", ["a"]).use_count[0] == 1.0
    assert backend.stats()["feedbacks"] == 2


def test_conflicting_feedback_raises_and_changes_nothing(backend):
    backend.put_impression(impression(ids=("a", "b", "c"), slots=(SLOTS_A, SLOTS_B, SLOTS_A)))
    mark(backend, used=["a"])
    before, stats = snapshot(backend), backend.stats()
    with pytest.raises(FeedbackError, match="'a' was already recorded as used"):
        feed(backend, used=["c"])
    assert snapshot(backend) == before and backend.stats() == stats
    assert backend.get_impression(R1).resolved == {"a": True}  # "c" was not applied either


def test_doc_stats_update(backend):
    backend.put_impression(impression())
    feed(backend, time=NOW + 10)
    docs = backend.read_docs("ns", ["a", "b", "zzz"])
    assert docs.last_used[0] == NOW + 10 and math.isnan(docs.last_used[1])
    assert docs.use_count.tolist() == [1.0, 0.0, 0.0]
    assert backend.stats()["documents"] == 1  # a row only for what was used
    # A later feedback stamped earlier never moves last_used back.
    backend.put_impression(impression(recall_id=R2))
    feed(backend, R2, used=["a"], time=NOW)
    backend.put_impression(impression(recall_id=R3))
    feed(backend, R3, used=["b"], time=NOW + 20)
    docs = backend.read_docs("ns", ["a", "b"])
    assert docs.last_used.tolist() == [NOW + 10, NOW + 20]
    assert docs.use_count.tolist() == [2.0, 1.0]
    assert backend.read_docs("other", ["a"]).use_count[0] == 0.0  # per namespace


def test_a_use_time_from_a_bad_clock_does_not_pin_a_document(backend):
    """One feedback stamped far in the future is replaced by the next sane one."""
    backend.put_impression(impression())
    assert backend.apply([update(ranks=(1,), codes=(USED,), time=NOW + 400 * 86_400)]) == [True]
    backend.put_impression(impression(recall_id=R2))
    assert backend.apply([update(R2, ranks=(1,), codes=(USED,), time=NOW + 5)]) == [True]
    assert backend.read_docs("ns", ["a"]).last_used.tolist() == [NOW + 5]


def test_list_links_and_the_global_layer(backend):
    for r, ns in ((R1, "ns"), (R2, "other")):
        backend.put_impression(impression(recall_id=r, namespace=ns))
        feed(backend, r, namespace=ns)
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
    for r, ns in ((R1, "zeta"), (R2, "alpha"), (R3, "zeta")):
        backend.put_impression(impression(recall_id=r, namespace=ns))
        feed(backend, r, namespace=ns)
    assert backend.namespaces() == ["alpha", "zeta"]


@pytest.mark.parametrize("recall_id", ["ffffffffffffffff", "8000000000000000", "0" * 16,
                                       "not-a-recall-id"])
def test_feedback_for_a_recall_id_never_made_is_unknown(backend, recall_id):
    """Well-formed or not, an id no rerank made reads as unknown (a key past 2**63, which no
    SQL integer holds, included)."""
    assert backend.get_impression(recall_id) is None
    with pytest.raises(FeedbackError, match="unknown"):
        feed(backend, recall_id)


def test_feedback_for_a_recall_of_another_namespace_is_unknown(backend):
    backend.put_impression(impression(namespace="alice"))
    with pytest.raises(FeedbackError, match="unknown") as info:
        feed(backend, namespace="bob")
    assert "alice" not in str(info.value)
    assert backend.list_links("bob")[0] == [] and backend.list_links(None)[0] == []


@pytest.mark.parametrize("scrub", [True, False])
def test_forget_namespace(backend, scrub):
    for r, ns in ((R1, "keep"), (R2, "gone"), (R3, "gone")):
        backend.put_impression(impression(recall_id=r, namespace=ns))
        feed(backend, r, namespace=ns)
    _, kpos, kneg = backend.list_links("keep")
    _, gpos_before, gneg_before = backend.list_links(None)
    backend.forget_namespace("gone", scrub_global=scrub)
    assert backend.namespaces() == ["keep"]
    assert backend.list_links("gone")[0] == []
    assert backend.read_docs("gone", ["a"]).use_count[0] == 0.0
    assert backend.get_impression(R2) is None and backend.get_impression(R3) is None
    assert backend.get_impression(R1) is not None
    _, gpos, gneg = backend.list_links(None)
    if scrub:  # the pool holds only what "keep" taught
        np.testing.assert_allclose(gpos, kpos, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gneg, kneg, rtol=1e-12, atol=1e-12)
    else:
        assert gpos.tolist() == gpos_before.tolist() and gneg.tolist() == gneg_before.tolist()
    # The namespace can start again from scratch.
    backend.put_impression(impression(recall_id=R4, namespace="gone"))
    assert feed(backend, R4, namespace="gone").applied


@pytest.mark.parametrize("scrub", [True, False])
def test_forget_removes_the_feature_names_only_that_namespace_had(backend, scrub):
    private = ("kind:fact", "source:alice@example.com")
    backend.put_impression(impression(namespace="alice", slots=(private, SLOTS_B)))
    feed(backend, namespace="alice")
    backend.put_impression(impression(recall_id=R2, namespace="bob"))
    feed(backend, R2, namespace="bob")
    assert "qt:when&source:alice@example.com" in backend.list_links(None)[0]
    backend.forget_namespace("alice", scrub_global=scrub)
    pooled = backend.list_links(None)[0]
    assert not any("alice" in f for f in pooled)
    assert "kind:fact" in pooled  # bob has it too
    assert backend.stats()["global_links"] == len(pooled)


def _counts(backend: StateBackend) -> dict[str, int]:
    """``stats()`` but the caps (Redis has no count cap on impressions without feedback)."""
    return {k: v for k, v in backend.stats().items() if not k.startswith("max_")}


def test_stats(backend):
    assert _counts(backend) == {"namespaces": 0, "links": 0, "global_links": 0, "documents": 0,
                                "impressions": 0, "feedbacks": 0, "open_impressions": 0}
    for r, ns in ((R1, "ns"), (R2, "other")):
        backend.put_impression(impression(recall_id=r, namespace=ns))
        feed(backend, r, namespace=ns)
    backend.put_impression(impression(recall_id=R3))
    assert _counts(backend) == {"namespaces": 2, "links": 12, "global_links": 6, "documents": 2,
                                "impressions": 3, "feedbacks": 2, "open_impressions": 1}


# ----------------------------------------------------------------------- expiry and bounds

def _aged(seconds: float, n: int) -> str:
    return f"{(int((time.time() - seconds) * 1000) << 20) | n:016x}"


def test_impressions_without_feedback_expire_by_age(make_backend):
    state = make_backend(impression_ttl_s=3600)
    old = [_aged(7200, i) for i in range(5)]
    fresh = [_aged(60, i) for i in range(5)]
    for r in old + fresh:
        state.put_impression(impression(recall_id=r))
    state.prune()
    assert [state.get_impression(r) is None for r in old] == [True] * 5
    assert all(state.get_impression(r) is not None for r in fresh)
    rr = Reranker(state)
    with pytest.raises(FeedbackError, match="unknown"):
        rr.feedback(old[0], used=["a"])


def test_impressions_with_feedback_are_kept_up_to_a_count(make_backend):
    state = make_backend(max_impressions=3, impression_ttl_s=10 * 86_400)
    ids = [_aged(7200 - i, i) for i in range(6)]
    for r in ids:
        state.put_impression(impression(recall_id=r))
        assert state.apply([update(r)]) == [True]
    state.prune()
    assert [state.get_impression(r) is not None for r in ids] == [False] * 3 + [True] * 3


def test_an_impression_survives_500_later_recalls_by_default(make_backend):
    rr = Reranker(make_backend())
    cands = [{"id": f"m{i}", "text": f"Note {i} from Monday", "score": float(i)} for i in range(4)]
    first = rr.rerank("When was it?", cands, namespace="ns", k=3, now=NOW)
    for t in range(500):
        rr.rerank("When was it?", cands, namespace="ns", k=3, now=NOW + t)
    out = rr.feedback(first.recall_id, used=[first.ids[0]], namespace="ns")
    assert out.applied == tuple(first.ids)
    assert rr.stats()["impressions"] == 501


# ------------------------------------------------------------------------- explicit ids

def test_an_explicit_feedback_id_is_scoped_to_its_namespace(backend):
    first = backend.put_impression(impression(recall_id=R1, namespace="alice"), feedback_id="42")
    assert first == R1
    # bob's "42" is his own: a new impression, not alice's
    assert backend.put_impression(impression(recall_id=R2, namespace="bob",
                                             ids=("x",), slots=(SLOTS_A,)), feedback_id="42") == R2
    # alice's retry with "42" finds her impression again
    assert backend.put_impression(impression(recall_id=R3, namespace="alice"),
                                  feedback_id="42") == R1
    assert backend.get_impression(R3) is None


def test_a_generated_recall_id_already_taken_is_refused(backend):
    assert backend.put_impression(impression(ids=("a", "b"))) == R1
    assert backend.put_impression(impression(ids=("c",), slots=(SLOTS_A,))) is None
    assert backend.get_impression(R1).ids == ("a", "b")


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
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "x.db"
    state = open_state(f"sqlite:///{path}")
    try:
        assert isinstance(state, SQLiteState) and state.path == str(path)
        assert path.exists() and state.integrity_check() == "ok"
    finally:
        state.close()


# ------------------------------------------------------------------------- group commits

def test_feedback_many_equals_one_by_one_and_keeps_each_feedback_atomic(make_backend):
    cands = [{"id": f"m{i}", "text": f"Note {i} from Monday", "score": float(10 - i),
              "metadata": {"kind": "fact" if i % 2 else "note"}} for i in range(6)]
    one, many = Reranker(make_backend()), Reranker(make_backend())
    plan = [("ns", "When was it?", 0), ("ns", "Who was it?", 1), ("other", "When?", 2)]
    shown = []
    for ns, query, used in plan:
        a = one.rerank(query, cands, namespace=ns, k=3, now=NOW)
        b = many.rerank(query, cands, namespace=ns, k=3, now=NOW)
        assert a.ids == b.ids
        shown.append((a.recall_id, b.recall_id, [a.ids[used]]))
    # the second recall already got "nothing used": using an item now contradicts it
    one.feedback(shown[1][0], used=[])
    many.feedback(shown[1][1], used=[])
    for i in (0, 2):
        one.feedback(shown[i][0], used=shown[i][2])
    out = many.feedback_many([(shown[0][1], shown[0][2]), (shown[1][1], shown[1][2]),
                              ("0000000000000000", ["x"]), (shown[2][1], shown[2][2])])
    assert [type(o).__name__ for o in out] == ["FeedbackOutcome", "FeedbackError",
                                               "FeedbackError", "FeedbackOutcome"]
    # without namespace=, each outcome lists only the ids its request named
    assert out[0].applied == tuple(shown[0][2]) and out[3].applied == tuple(shown[2][2])
    assert snapshot(many.state) == snapshot(one.state)  # the refused one changed nothing
    assert many.stats() == one.stats()
    # replaying the group changes nothing: each feedback stays idempotent
    again = many.feedback_many([(shown[0][1], shown[0][2]), (shown[2][1], shown[2][2])])
    assert all(o.applied == () for o in again) and snapshot(many.state) == snapshot(one.state)
    assert many.stats() == one.stats()  # nor counts as a feedback again


# ------------------------------------------------------------------------- co-use edges

CO_USE = CoUse(max_per_doc=3, max_edges=5)
IDS5 = ("a", "b", "c", "d", "e")
DAY = 86_400.0


def co_use(backend, recall_id=R1, used=(), ignored=(), time=NOW, namespace="ns"):
    """Verdicts on some shown items through the learning path with co-use edges on (the other
    items stay open)."""
    rr = Reranker(backend, config=replace(CONFIG, learning=replace(CONFIG.learning, co_use=CO_USE)))
    if used:
        rr.mark_used(recall_id, list(used), now=time, namespace=namespace)
    if ignored:
        rr.mark_ignored(recall_id, list(ignored), now=time, namespace=namespace)


def _show(backend, recall_id, namespace="ns", ids=IDS5):
    backend.put_impression(impression(recall_id=recall_id, namespace=namespace, ids=ids,
                                      slots=(SLOTS_A,) * len(ids)))


def test_edges_form_only_between_items_used_together(backend):
    _show(backend, R1)
    co_use(backend, used=["a"], ignored=["b", "c"])
    assert backend.list_edges("ns") == []  # one used item: no pair
    _show(backend, R2)
    co_use(backend, R2, used=["a", "c"], ignored=["b"])
    assert backend.list_edges("ns") == [("a", "c", pytest.approx(0.2), 1.0, NOW)]
    assert backend.list_edges("other") == []


def test_a_retried_feedback_strengthens_once_and_split_feedback_pairs_once(backend):
    _show(backend, R1)
    co_use(backend, used=["a", "b"])
    co_use(backend, used=["a", "b"])  # the retry
    assert backend.list_edges("ns") == [("a", "b", pytest.approx(0.2), 1.0, NOW)]
    # "c" used later in the same recall pairs with a and b, once each
    co_use(backend, used=["c"], time=NOW + 5)
    co_use(backend, used=["c"], time=NOW + 5)
    assert [(a, b, n) for a, b, _, n, _ in backend.list_edges("ns")] == [
        ("a", "b", 1.0), ("a", "c", 1.0), ("b", "c", 1.0)]


def test_an_edge_change_worked_out_from_an_older_version_is_stale(backend):
    _show(backend, R1)
    _show(backend, R2)
    co_use(backend, used=["a", "b"])
    edges = backend.edge_state("ns", ["c", "d"])
    assert edges.version == 1 and edges.total == 1
    old = EdgeChange(0, (("c", "d", 0.2, 1.0, NOW),), (), 2)
    assert backend.apply([update(R2, ranks=(3, 4), codes=(USED, USED), used=("c", "d"),
                                 edges=old)]) == [False]
    assert backend.get_impression(R2).resolved == {}
    new = EdgeChange(1, (("c", "d", 0.2, 1.0, NOW),), (), 2)
    assert backend.apply([update(R2, ranks=(3, 4), codes=(USED, USED), used=("c", "d"),
                                 edges=new)]) == [True]
    assert [e[:2] for e in backend.list_edges("ns")] == [("a", "b"), ("c", "d")]
    assert backend.edge_state("ns", ["c"]).version == 2


def test_edges_decay_strengthen_and_potentiate_alike(backend):
    for k in range(7):
        r = rid(10 + k)
        _show(backend, r)
        co_use(backend, r, used=["a", "b"], time=NOW + k * DAY)
    ((a, b, s, n, last),) = backend.list_edges("ns")
    expected, count, t = 0.0, 0.0, NOW
    from heaprank.model.co_use import strengthened
    for k in range(7):
        expected, count, t = strengthened(expected, count, t, NOW + k * DAY, CO_USE)
    assert (a, b, n, last) == ("a", "b", 7.0, NOW + 6 * DAY)
    assert s == pytest.approx(expected, rel=1e-12)


def test_edges_stay_within_their_bounds(backend):
    ids = tuple(f"m{i}" for i in range(8))
    for k in range(6):  # every feedback uses m0 with two others: m0's degree would pass 3
        r = rid(20 + k)
        _show(backend, r, ids=ids)
        co_use(backend, r, used=["m0", ids[1 + k % 7], ids[1 + (k + 3) % 7]],
               time=NOW + k * 3600)
        edges = backend.list_edges("ns")
        assert len(edges) <= CO_USE.max_edges
        degree = {}
        for a, b, *_ in edges:
            degree[a] = degree.get(a, 0) + 1
            degree[b] = degree.get(b, 0) + 1
        assert max(degree.values()) <= CO_USE.max_per_doc


def test_read_with_edges_returns_the_edges_among_the_ids_read(backend):
    _show(backend, R1)
    co_use(backend, used=["a", "b", "d"])
    counts, docs, rows = backend.read_with_edges("ns", ["kind:fact"], ["x", "d", "a", "zz"])
    assert docs.use_count.tolist() == [0.0, 1.0, 1.0, 0.0]
    assert counts.pos.shape == (1,)
    assert list(zip(rows.i.tolist(), rows.j.tolist())) == [(1, 2)]  # d-a; b was not read
    assert rows.strength.tolist() == pytest.approx([0.2]) and rows.count.tolist() == [1.0]
    assert len(backend.read_with_edges("other", [], ["d", "a"])[2]) == 0


def test_forget_removes_every_edge_of_the_namespace(backend):
    for r, ns in ((R1, "keep"), (R2, "gone")):
        _show(backend, r, namespace=ns)
        co_use(backend, r, used=["a", "b"], namespace=ns)
    backend.forget_namespace("gone")
    assert backend.list_edges("gone") == []
    assert backend.edge_state("gone", ["a"]) == (0, 0, {})
    assert len(backend.list_edges("keep")) == 1


def test_the_same_co_use_gives_the_same_edges_and_ranking_on_every_backend(make_backend):
    cfg = Config(learning=Learning(co_use=CoUse(max_per_doc=4, max_edges=12))).with_weights(association=1.0)
    cands = [{"id": f"d{i}", "text": f"Note {i} from Monday", "score": float(20 - i)}
             for i in range(20)]
    rng = np.random.default_rng(7)
    reference, other = Reranker(MemoryState(), config=cfg), Reranker(make_backend(), config=cfg)
    for t in range(40):
        shown = [cands[i] for i in rng.choice(20, size=8, replace=False)]
        used = [c["id"] for c in shown[:3] if rng.random() < 0.7]
        for rr in (reference, other):
            rr.feedback(namespace="ns", query="When?", shown=shown, used=used,
                        now=NOW + t * DAY, feedback_id=str(t))
    assert other.state.list_edges("ns") == reference.state.list_edges("ns")
    assert reference.state.list_edges("ns")  # not vacuous
    a = reference.rerank("When?", cands, namespace="ns", k=20, now=NOW + 41 * DAY, track=False)
    b = other.rerank("When?", cands, namespace="ns", k=20, now=NOW + 41 * DAY, track=False)
    assert a.ids == b.ids
    assert [r.explain() for r in a] == [r.explain() for r in b]
    assert any(r.signals["association"] > 1 for r in a)
