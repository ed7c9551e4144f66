"""Redis impressions as fields of their bucket's hashes (issue 23; open ones by 10-minute slot, fed
ones by hour): recall ids minted by the backend name their bucket, open and fed impressions,
expiry, the cap, forgetting (nothing of the namespace left, in any key, field or value),
namespaces kept apart, and the impressions of the first layout 2 (a key and a pointer each,
format 2 bodies) still read and fed."""

from __future__ import annotations

import time

import pytest

from heaprank import FeedbackError, Reranker
from heaprank.records import Impression, new_recall_id
from heaprank.state import codec
from heaprank.state.redis import RedisState
from heaprank.state.redis.layout import KeyLayout
from tests.integration.redis_servers import unique_prefix

NOW = 1_750_000_000.0
CANDS = [{"id": f"user07/m{i:05d}", "text": f"Met Ana in Lisbon on day {i}", "score": 9.0 - i}
         for i in range(8)]


def _same_bucket_pair() -> tuple[str, str]:
    seen: dict[int, str] = {}
    for i in range(100_000):
        name = f"tenant-{i}"
        other = seen.setdefault(KeyLayout.bucket(name), name)
        if other != name:
            return other, name
    raise AssertionError("no two names share a bucket")


def _everything(state: RedisState) -> bytes:
    """Every key, hash field and value, zset member and string under the state's prefix."""
    client, out = state.client, []
    for key in client.scan_iter(match=state.layout.every_key(), count=1000):
        out.append(key)
        kind = client.type(key)
        if kind == b"hash":
            for field, value in client.hgetall(key).items():
                out += [field, value]
        elif kind == b"zset":
            out += client.zrange(key, 0, -1)
        elif kind == b"set":
            out += [str(m).encode() for m in client.smembers(key)]
        elif kind == b"string":
            out.append(client.get(key))
    return b"\n".join(out)


@pytest.fixture
def state(redis_url):
    made = RedisState(redis_url, prefix=unique_prefix())
    yield made
    made.clear()
    made.close()


def test_an_impression_is_a_field_of_its_hour_not_a_key(state):
    rr = Reranker(state)
    ranking = rr.rerank("Where did I meet Ana?", CANDS, namespace="ns", k=5, now=NOW)
    rid = ranking.recall_id
    assert len(rid) == 20 and int(rid[16:], 16) == state.layout.bucket("ns")
    assert not any(rid.encode() in k for k in state.client.scan_iter(match=state.layout.every_key()))
    open_key, fed_key = state.layout.impression_keys(rid)
    assert state.client.hexists(open_key, rid)  # its hash outlives it by its slot at most:
    assert 0 < state.client.pttl(open_key) <= (state.impression_ttl_s + 600) * 1000
    assert state.stats()["open_impressions"] == 1
    assert rr.feedback(rid, used=[ranking.ids[0]]).applied == (ranking.ids[0],)
    assert rr.feedback(rid, used=[ranking.ids[0]]).already_recorded == (ranking.ids[0],)
    assert not state.client.hexists(open_key, rid) and state.client.hexists(fed_key, rid)
    assert state.client.pttl(fed_key) == -1  # fed ones are kept until the cap
    body = state.layout.split_stored(state.client.hget(fed_key, rid))[1]
    assert body[0] == codec.COMPACT_VERSION and codec.verdicts_of(body)[0] == codec.USED
    fresh = RedisState(state.url, prefix=state.prefix)  # another process reads it back
    assert fresh.get_impression(rid).verdicts[0] == codec.USED
    fresh.close()
    assert [i.recall_id for i in state.feedback_log("ns")] == [rid]
    assert state.stats()["impressions"] == 1 and state.stats()["open_impressions"] == 0


def test_an_open_impression_past_its_ttl_is_unknown(redis_url):
    state = RedisState(redis_url, prefix=unique_prefix(), impression_ttl_s=1.0)
    try:
        rr = Reranker(state)
        ranking = rr.rerank("Where did I meet Ana?", CANDS, namespace="ns", k=5, now=NOW)
        time.sleep(1.2)
        assert state.get_impression(ranking.recall_id) is None
        assert state.stats()["open_impressions"] == 0
        with pytest.raises(FeedbackError, match="unknown"):
            Reranker(state).feedback(ranking.recall_id, used=[ranking.ids[0]])
    finally:
        state.clear()
        state.close()


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_the_cap_keeps_the_newest_fed_impressions(kind, request):
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    state = RedisState(url, prefix=unique_prefix(), max_impressions=3)
    try:
        rr = Reranker(state)
        made = []
        for i in range(7):
            r = rr.rerank("Where did I meet Ana?", CANDS, namespace=f"ns{i % 2}", k=5, now=NOW)
            rr.feedback(r.recall_id, used=[r.ids[0]])
            made.append(r.recall_id)
        state.prune()
        assert state.stats()["impressions"] == 3
        assert sorted(i.recall_id for i in state.feedback_log()) == sorted(made[-3:])
    finally:
        state.clear()
        state.close()


def test_forgetting_leaves_nothing_of_the_namespace_in_shared_hashes(state):
    gone, kept = _same_bucket_pair()
    rr = Reranker(state)
    rids = {}
    for ns in (gone, kept):
        fed = rr.rerank("Where did I meet Ana?", CANDS, namespace=ns, k=5, now=NOW)
        rr.feedback(fed.recall_id, used=[fed.ids[0]])
        opened = rr.rerank("When is my flight?", CANDS, namespace=ns, k=5, now=NOW)
        rids[ns] = (fed.recall_id, opened.recall_id)
    legacy = new_recall_id()  # and one of the first layout 2 form
    state.put_impression(Impression(legacy, gone, "other", NOW, True, ("a",), (("kind:note",),)))
    state.forget_namespace(gone)
    left = _everything(state)
    assert gone.encode() not in left
    assert not any(r.encode() in left for r in (*rids[gone], legacy))
    assert all(state.get_impression(r) is not None for r in rids[kept])
    assert rr.feedback(rids[kept][1], used=[CANDS[0]["id"]]).applied


def test_a_recall_id_of_another_namespace_is_unknown_and_says_nothing_of_it(state):
    same, other = _same_bucket_pair()
    rr = Reranker(state)
    ranking = rr.rerank("Where did I meet Ana?", CANDS, namespace=same, k=5, now=NOW)
    for ns in (other, "elsewhere"):  # the same bucket, and another one
        batch_state = RedisState(state.url, prefix=state.prefix)
        try:
            with pytest.raises(FeedbackError) as caught:
                Reranker(batch_state).feedback(ranking.recall_id, used=[ranking.ids[0]],
                                               namespace=ns)
            assert same not in str(caught.value)
        finally:
            batch_state.close()
    assert state.get_impression(ranking.recall_id).verdicts == (0,) * 5


def test_a_16_digit_id_and_a_format_2_body_still_read_and_take_feedback(state):
    layout, rid = state.layout, new_recall_id()
    imp = Impression(rid, "ns", "other", NOW, True, ("a", "b"), (("kind:note",), ("kind:fact",)))
    body_key = layout.body_key("ns", rid)
    expire_ms = int(time.time() * 1000) + 60_000
    state.client.set(body_key, codec.encode_compact(imp, codec.COMPACT_ROWS_VERSION), pxat=expire_ms)
    state.client.set(layout.pointer_key(rid), layout.pointer_value("ns"), pxat=expire_ms)
    state.client.zadd(layout.bucket_key("ns", "o"), {body_key: expire_ms})
    state.client.sadd(layout.registry_key(layout.bucket("ns")), layout.bucket("ns"))
    assert state.get_impression(rid).ids == ("a", "b")
    assert Reranker(state).feedback(rid, used=["b"]).applied == ("b",)
    assert state.client.get(body_key)[0] == codec.COMPACT_ROWS_VERSION
    assert [i.verdicts for i in state.feedback_log("ns")] == [(2, 1)]


def test_minted_ids_rank_learn_and_forget_in_a_cluster(redis_cluster_url):
    state = RedisState(redis_cluster_url, prefix=unique_prefix())
    try:
        rr = Reranker(state)
        ranking = rr.rerank("Where did I meet Ana?", CANDS, namespace="c1", k=5, now=NOW)
        assert len(ranking.recall_id) == 20
        assert rr.feedback(ranking.recall_id, used=[ranking.ids[0]]).applied
        assert [i.recall_id for i in state.feedback_log("c1")] == [ranking.recall_id]
        state.forget_namespace("c1")
        assert state.get_impression(ranking.recall_id) is None
    finally:
        state.clear()
        state.close()


def test_minted_ids_still_resolve_after_state_copy(state, tmp_path):
    """A copy to another Redis state keeps the hour layout; a copy to SQLite keys an impression
    by its id's first 16 digits, which a 20-digit id resolves to there."""
    from heaprank import SQLiteState
    from heaprank.state.copy import copy_state

    rr = Reranker(state)
    fed = rr.rerank("Where did I meet Ana?", CANDS, namespace="maya", k=5, now=NOW)
    rr.feedback(fed.recall_id, used=[fed.ids[0]])
    waiting = rr.rerank("When is my flight?", CANDS, namespace="maya", k=5, now=NOW)
    other = RedisState(state.url, prefix=unique_prefix())
    lite = SQLiteState(tmp_path / "copy.db")
    try:
        for target in (other, lite):
            copy_state(state, target)
            again = Reranker(target)
            assert again.feedback(fed.recall_id, used=[fed.ids[0]]).already_recorded == (fed.ids[0],)
            assert again.feedback(waiting.recall_id, used=[waiting.ids[1]]).applied == (waiting.ids[1],)
        assert len(other.layout.mint("maya")) == 20 and other.get_impression(waiting.recall_id)
    finally:
        lite.close()
        other.clear()
        other.close()


def test_an_explicit_feedback_id_is_applied_once_with_minted_ids(state):
    """The explicit form: the same feedback id again (a client retry, another process) finds the
    recall it made and records nothing twice; another namespace's same id is its own."""
    rr, other = Reranker(state), Reranker(RedisState(state.url, prefix=state.prefix))
    first = rr.feedback(namespace="ns", query="Where?", shown=CANDS[:4], used=[CANDS[0]["id"]],
                        feedback_id="f-1", now=NOW)
    again = other.feedback(namespace="ns", query="Where?", shown=CANDS[:4], used=[CANDS[0]["id"]],
                           feedback_id="f-1", now=NOW)
    assert len(first.recall_id) == 20 and again.recall_id == first.recall_id
    shown = tuple(c["id"] for c in CANDS[:4])  # (1 used, 3 ignored: each recorded once)
    assert sorted(first.applied) == sorted(again.already_recorded) == sorted(shown)
    assert again.applied == ()
    elsewhere = rr.feedback(namespace="ns2", query="Where?", shown=CANDS[:4], used=[],
                            feedback_id="f-1", now=NOW)
    assert elsewhere.recall_id != first.recall_id
    assert state.stats()["feedbacks"] == 2
    other.close()
