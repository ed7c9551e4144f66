"""Many tenants, one state: nothing of one namespace reaches another except the pooled counts.

Each test plays a hostile or careless tenant against a victim, on every backend.
"""

from __future__ import annotations

import gc
import json
import sqlite3

import pytest

from heaprank import (
    Config,
    ConfigError,
    CoUse,
    Features,
    FeedbackError,
    Learning,
    MemoryState,
    Prior,
    Reranker,
    Retention,
    SQLiteState,
)
from tests.integration.redis_servers import unique_prefix

NOW = 1_750_000_000.0
SECRET_SOURCE = "alice.secret@example.com"
SECRET_ID = "alice-private-doc-7f3a"
SECRET_KIND = "alice-kind-xyzzy"
SECRET_KEY = "alice-key-qwerty"
TAG_SLOT = "urgent"  # a tag slot comes from the config, not from a namespace
SECRET_QUERY = "When is the Zanzibar surgery for Alice?"
SECRETS = (SECRET_SOURCE, SECRET_ID, SECRET_KIND, SECRET_KEY, "Zanzibar", "alice")
#: Every per-namespace store in use: doc links, tag slots, co-use edges.
CONFIG = Config(features=Features(doc_features=True, tag_slots=(TAG_SLOT,)),
                learning=Learning(co_use=CoUse()))


def alice_candidates():
    return [
        {"id": SECRET_ID, "text": "Zanzibar surgery on March 3 at 9:40", "score": 3.0,
         "metadata": {"source": SECRET_SOURCE, "kind": SECRET_KIND, "key": SECRET_KEY,
                      "tags": [TAG_SLOT, "alice-private-tag"], "created_at": NOW - 86_400}},
        {"id": SECRET_ID + "-b", "text": "Zanzibar is far", "score": 1.0,
         "metadata": {"source": SECRET_SOURCE, "kind": SECRET_KIND}},
    ]


BOB = [{"id": "bob-1", "text": "Dentist on Friday", "score": 2.0, "metadata": {"kind": "fact"}},
       {"id": "bob-2", "text": "Dentists are nice", "score": 1.0, "metadata": {"kind": "note"}}]


@pytest.fixture(params=["memory", "sqlite"])
def rr(request, tmp_path):
    state = MemoryState() if request.param == "memory" else SQLiteState(tmp_path / "t.db")
    reranker = Reranker(state, config=CONFIG)
    yield reranker
    reranker.close()


def test_a_reused_explicit_feedback_id_is_each_namespaces_own(rr):
    # alice first, then bob with the same id: bob's feedback applies to bob's items only
    a = rr.feedback(namespace="alice", query=SECRET_QUERY, shown=alice_candidates(),
                    used=[SECRET_ID], now=NOW, feedback_id="42")
    b = rr.feedback(namespace="bob", query="When is the dentist?", shown=BOB, used=["bob-1"],
                    now=NOW, feedback_id="42")
    assert a.recall_id != b.recall_id
    assert b.applied == ("bob-1", "bob-2")
    assert rr.state.read_docs("bob", ["bob-1"]).use_count.tolist() == [1.0]
    # and in the reverse order, alice's feedback is not dropped
    c = rr.feedback(namespace="carol", query="When?", shown=BOB, used=["bob-2"], now=NOW,
                    feedback_id="43")
    d = rr.feedback(namespace="alice", query=SECRET_QUERY, shown=alice_candidates(),
                    used=[SECRET_ID], now=NOW, feedback_id="43")
    assert c.applied and d.applied == (SECRET_ID, SECRET_ID + "-b")


def test_a_reused_feedback_id_with_another_shown_list_is_refused_without_leaking(rr):
    rr.feedback(namespace="alice", query=SECRET_QUERY, shown=alice_candidates(),
                used=[SECRET_ID], now=NOW, feedback_id="7")
    with pytest.raises(FeedbackError) as info:
        rr.feedback(namespace="alice", query="When?", shown=BOB, used=["bob-1"], now=NOW,
                    feedback_id="7")
    assert "another shown list" in str(info.value)
    assert not any(s in str(info.value) for s in SECRETS)


def test_feedback_naming_the_wrong_namespace_is_refused_without_leaking(rr):
    ranking = rr.rerank(SECRET_QUERY, alice_candidates(), namespace="alice", k=2, now=NOW)
    with pytest.raises(FeedbackError) as info:
        rr.feedback(ranking.recall_id, used=["bob-1"], namespace="bob")
    with pytest.raises(FeedbackError) as info2:
        rr.mark_used(ranking.recall_id, ["x"], namespace="bob")
    for err in (info.value, info2.value):
        assert "unknown" in str(err)  # as for an id never issued: alice's recall stays hers
        assert not any(s in str(err) for s in SECRETS)
    assert rr.stats()["feedbacks"] == 0
    # a used id that was not shown: the message does not list what was shown
    with pytest.raises(FeedbackError) as info3:
        rr.feedback(ranking.recall_id, used=["bob-1"])
    assert not any(s in str(info3.value) for s in SECRETS)
    assert rr.feedback(ranking.recall_id, used=[SECRET_ID], namespace="alice").applied


def test_a_failed_explicit_feedback_leaves_no_orphan_impression(rr):
    with pytest.raises(FeedbackError):
        rr.feedback(namespace="alice", query=SECRET_QUERY, shown=alice_candidates(),
                    used=["not-shown"], now=NOW, feedback_id="9")
    assert rr.stats()["impressions"] == 0
    # the id is still free: the corrected retry goes through
    assert rr.feedback(namespace="alice", query=SECRET_QUERY, shown=alice_candidates(),
                       used=[SECRET_ID], now=NOW, feedback_id="9").applied


def _teach(rr: Reranker) -> None:
    for t in range(3):
        ranking = rr.rerank(SECRET_QUERY, alice_candidates(), namespace="alice", k=2,
                            now=NOW + t)
        rr.feedback(ranking.recall_id, used=[SECRET_ID])
        rr.rerank(SECRET_QUERY, alice_candidates(), namespace="alice", k=2, now=NOW + t)
        ranking = rr.rerank("When is the dentist?", BOB, namespace="bob", k=2, now=NOW + t)
        rr.feedback(ranking.recall_id, used=["bob-1"])
    # Explicit feedback using two items together: a co-use edge in each namespace.
    rr.feedback(namespace="alice", query=SECRET_QUERY, shown=alice_candidates(),
                used=[SECRET_ID, SECRET_ID + "-b"], now=NOW, feedback_id="alice-fb-id")
    rr.feedback(namespace="bob", query="When is the dentist?", shown=BOB, used=["bob-1", "bob-2"],
                now=NOW, feedback_id="bob-fb-id")
    assert rr.state.list_edges("alice") and rr.state.list_edges("bob")  # not vacuous


def _memory_strings(state: MemoryState) -> str:
    """Every string and byte string reachable from the state's structures, as one text."""
    seen: set[int] = set()
    out: list[str] = []
    stack: list[object] = [state.__dict__]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            out.append(obj)
        elif isinstance(obj, (bytes, bytearray)):
            out.append(bytes(obj).decode("utf-8", "replace"))
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, s) for s in obj.__slots__ if hasattr(obj, s))
        elif hasattr(obj, "__dict__") and not callable(obj):
            stack.append(vars(obj))
    return "\n".join(out)


@pytest.mark.parametrize("scrub", [True, False])
def test_forgetting_a_namespace_leaves_no_byte_of_it_in_memory(scrub):
    rr = Reranker(MemoryState(), config=CONFIG)
    _teach(rr)
    assert SECRET_SOURCE in _memory_strings(rr.state) and SECRET_ID in _memory_strings(rr.state)
    rr.forget_namespace("alice", scrub_global=scrub)
    dump = _memory_strings(rr.state)
    leaked = [s for s in SECRETS if s in dump]
    assert leaked == []
    assert "bob-1" in dump  # bob is untouched
    assert rr.links("bob")


@pytest.mark.parametrize("scrub", [True, False])
def test_forgetting_a_namespace_leaves_no_byte_of_it_in_the_sqlite_file(tmp_path, scrub):
    path = tmp_path / "tenants.db"
    rr = Reranker(SQLiteState(path), config=CONFIG)
    _teach(rr)
    before = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert all(s.encode() in before for s in (SECRET_SOURCE, SECRET_ID, "alice"))
    rr.forget_namespace("alice", scrub_global=scrub)
    assert rr.links("bob")
    rr.close()
    gc.collect()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # the file, its WAL and shm
    leaked = [s for s in SECRETS if s.encode() in raw]
    assert leaked == []
    assert b"bob-1" in raw
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def _redis_bytes(state) -> bytes:
    """Every key under the state's prefix with its whole value, as one byte string (values read
    by type, not DUMPed: a dump may be compressed and hide a name)."""
    client, out = state.client, []
    for key in client.scan_iter(match=f"{state.prefix}:*"):
        kind = client.type(key)
        if kind == b"hash":
            value = b"".join(f + v for f, v in client.hgetall(key).items())
        elif kind == b"set":
            value = b"".join(client.smembers(key))
        elif kind == b"zset":
            value = b"".join(client.zrange(key, 0, -1))
        else:
            value = client.get(key) or b""
        out.append(key + value)
    return b"".join(out)


@pytest.mark.parametrize("scrub", [True, False])
def test_forgetting_a_namespace_leaves_no_byte_of_it_in_redis(redis_url, scrub):
    from heaprank.state.redis import RedisState

    state = RedisState(redis_url, prefix=unique_prefix())
    try:
        rr = Reranker(state, config=CONFIG)
        _teach(rr)
        before = _redis_bytes(state)
        assert all(s.encode() in before for s in (SECRET_SOURCE, SECRET_ID, "alice"))
        rr.forget_namespace("alice", scrub_global=scrub)
        raw = _redis_bytes(state)
        assert [s for s in SECRETS if s.encode() in raw] == []
        assert b"bob-1" in raw and state.list_edges("bob")
    finally:
        state.clear()
        state.close()


def test_edges_never_cross_namespaces(rr):
    _teach(rr)
    assert [e[:2] for e in rr.state.list_edges("alice")] == [(SECRET_ID, SECRET_ID + "-b")]
    assert [e[:2] for e in rr.state.list_edges("bob")] == [("bob-1", "bob-2")]
    # bob ranking alice's very documents sees none of her edges
    weighted = CONFIG.with_weights(association=1.0)
    ranking = rr.rerank("When?", alice_candidates(), namespace="bob", k=2, now=NOW, config=weighted)
    assert all(r.signals["association"] == 1.0 for r in ranking)
    mine = rr.rerank("When?", alice_candidates(), namespace="alice", k=2, now=NOW, config=weighted)
    assert max(r.signals["association"] for r in mine) > 1.0


def test_the_process_cache_is_dropped_with_the_namespace():
    rr = Reranker(config=CONFIG)
    _teach(rr)
    assert any(SECRET_SOURCE in n for n in rr._space.names)
    rr.forget_namespace("alice")
    assert not any(SECRET_SOURCE in n for n in rr._space.names)
    assert rr._space.cached_bytes == 0


def test_a_per_call_config_may_not_change_what_feedback_learns():
    rr = Reranker()
    cands = BOB
    for config in (Config(learning=Learning(prior=Prior(mean=0.2))),
                   Config(learning=Learning(em_credit=False)),
                   Config(learning=Learning(reject_discount="none")),
                   Config(features=Features(doc_features=True)),
                   Config(features=Features(tag_slots=("x",)))):
        with pytest.raises(ConfigError, match="scoring fields only"):
            rr.rerank("When?", cands, namespace="bob", now=NOW, config=config)
    scoring = Config(retention=Retention(half_life_s=3600.0, recency_floor=0.5)).with_weights(
        usefulness=3.0)
    assert rr.rerank("When?", cands, namespace="bob", now=NOW, config=scoring).ids


def test_a_namespace_log_holds_only_its_own_impressions_and_tuning_reports_no_secret(rr):
    _teach(rr)
    bob = list(rr.state.feedback_log("bob"))
    assert bob and {i.namespace for i in bob} == {"bob"}
    assert not any(s in repr(bob) for s in SECRETS)
    result = rr.tune("bob", min_impressions=1)
    assert result.fit.impressions == 3  # bob's three reranks, none of alice's
    assert not any(s in json.dumps(result.fit.to_dict(), default=str) for s in SECRETS)
    rr.forget_namespace("alice")
    assert {i.namespace for i in rr.state.feedback_log()} == {"bob"}
