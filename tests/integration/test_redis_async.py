"""The async Redis client (``redis.asyncio``): ``Reranker.arerank``/``afeedback`` on a Redis state
await their round trips on the event loop (no worker thread), rank and learn exactly as the sync
client does, stay exact under many concurrent coroutines (with connections killed under them),
and degrade as the sync path does when the server is down."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import numpy as np
import pytest

from heaprank import Config, ConfigError, CoUse, Learning, Refit, Reranker, StateUnavailableError
from heaprank.state.redis import RedisState
from heaprank.state.redis.async_backend import AsyncRedisState
from tests.integration import redis_workers as workers
from tests.integration.redis_servers import unique_prefix

NOW = 1_750_000_000.0
DAY = 86_400.0
CANDIDATES = [{"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3,
               "metadata": {"kind": "fact"}},
              {"id": "seat", "text": "I prefer window seats", "score": 5.1},
              {"id": "price", "text": "Flights to Lisbon cost $400", "score": 6.0},
              {"id": "chat", "text": "ok", "score": 1.0}]
QUERIES = ("When is my flight?", "What seat do I like?", "How much is it?")


@pytest.fixture(params=["redis", "redis-cluster"])
def url(request) -> str:
    return request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url")


@pytest.fixture()
def no_threads(monkeypatch):
    """Fail any test that would fall back to a worker thread."""
    async def refuse(*args, **kwargs):
        raise AssertionError("ran in a worker thread, not on the async client")
    monkeypatch.setattr(asyncio, "to_thread", refuse)


def _on_a_loop(state: RedisState, work):  # type: ignore[no-untyped-def]
    """``asyncio.run(work())``, releasing the state's async client of that loop after."""
    async def main():  # type: ignore[no-untyped-def]
        try:
            return await work()
        finally:
            await state.aclose_loop()
    return asyncio.run(main())


def _session(n: int) -> list[tuple[str, str, int]]:
    """(namespace, query, position of the shown item the answer used) of ``n`` answers."""
    return [(f"user{i % 3}", QUERIES[i % 3], i % 2) for i in range(n)]


def test_async_reranks_and_learns_exactly_as_the_sync_client(url, no_threads):
    prefix_sync, prefix_async = unique_prefix(), unique_prefix()
    sync = Reranker(RedisState(url, prefix=prefix_sync))
    aio = Reranker(RedisState(url, prefix=prefix_async))
    try:
        sync_ids = []
        for ns, query, used in _session(12):
            ranking = sync.rerank(query, CANDIDATES, namespace=ns, k=3, now=NOW)
            sync_ids.append(ranking.ids)
            sync.feedback(ranking.recall_id, used=[ranking.ids[used]])

        async def run() -> list[tuple[str, ...]]:
            out = []
            for ns, query, used in _session(12):
                ranking = await aio.arerank(query, CANDIDATES, namespace=ns, k=3, now=NOW)
                out.append(ranking.ids)
                outcome = await aio.afeedback(ranking.recall_id, used=[ranking.ids[used]], namespace=ns)
                assert set(outcome.applied) == set(ranking.ids)
                again = await aio.afeedback(ranking.recall_id, used=[ranking.ids[used]],  # a no-op
                                             namespace=ns)
                assert again.applied == () and set(again.already_recorded) == set(ranking.ids)
            explicit = await aio.afeedback(namespace="user0", query=QUERIES[0],
                                           shown=CANDIDATES[:2], used=["lisbon"], now=NOW,
                                           feedback_id="answer-1")
            repeat = await aio.afeedback(namespace="user0", query=QUERIES[0],
                                         shown=CANDIDATES[:2], used=["lisbon"], now=NOW,
                                         feedback_id="answer-1")
            assert explicit.applied and repeat.recall_id == explicit.recall_id and not repeat.applied
            assert isinstance(aio.state.async_backend(), AsyncRedisState)
            return out

        async_ids = _on_a_loop(aio.state, run)
        sync.feedback(namespace="user0", query=QUERIES[0], shown=CANDIDATES[:2], used=["lisbon"],
                      now=NOW, feedback_id="answer-1")
        assert async_ids == sync_ids
        got, want = workers.snapshot(aio.state), workers.snapshot(sync.state)
        if not aio.state.cluster:
            assert got == want
        else:  # pooled deltas pushed in batches: the sums may differ in their last bit
            assert got.keys() == want.keys()
            for ns, (features, pos, neg) in want.items():
                assert got[ns][0] == features
                np.testing.assert_allclose(got[ns][1], pos, rtol=1e-12)
                np.testing.assert_allclose(got[ns][2], neg, rtol=1e-12)
        assert aio.stats()["feedbacks"] == sync.stats()["feedbacks"] == 13
    finally:
        for rr in (sync, aio):
            rr.state.clear()
            rr.close()


def test_async_co_use_learns_and_ranks_exactly_as_the_sync_client(url, no_threads):
    """With co-use edges learned and weighted, the async client reads the edges in its rerank's
    round trip and updates them in its feedback script, as the sync client does."""
    cfg = Config(learning=Learning(co_use=CoUse(max_per_doc=4, max_edges=12))).with_weights(association=1.0)
    cands = [{"id": f"d{i}", "text": f"Note {i} from Monday", "score": float(20 - i)}
             for i in range(20)]
    sync = Reranker(RedisState(url, prefix=unique_prefix()), config=cfg)
    aio = Reranker(RedisState(url, prefix=unique_prefix()), config=cfg)

    def session():  # type: ignore[no-untyped-def]
        """(time, shown, positions of the used items) of 30 answers, the same for both."""
        rng = np.random.default_rng(11)
        for t in range(30):
            shown = [cands[i] for i in rng.choice(20, size=8, replace=False)]
            yield NOW + t * DAY, shown, [p for p in range(4) if rng.random() < 0.6]

    try:
        sync_seen = []
        for when, shown, used in session():
            ranking = sync.rerank("When?", shown, namespace="ns", k=6, now=when)
            sync_seen.append([r.explain() for r in ranking])
            sync.feedback(ranking.recall_id, used=[ranking.ids[p] for p in used], now=when)

        async def run() -> list[list[str]]:
            seen = []
            for when, shown, used in session():
                ranking = await aio.arerank("When?", shown, namespace="ns", k=6, now=when)
                seen.append([r.explain() for r in ranking])
                await aio.afeedback(ranking.recall_id, used=[ranking.ids[p] for p in used],
                                    now=when)
            return seen

        assert _on_a_loop(aio.state, run) == sync_seen
        edges = sync.state.list_edges("ns")
        assert edges and aio.state.list_edges("ns") == edges
        assert workers.snapshot(aio.state) == workers.snapshot(sync.state)
        assert any("co-used with" in line for lines in sync_seen for line in lines)  # not vacuous
    finally:
        for rr in (sync, aio):
            rr.state.clear()
            rr.close()


def _killer(url: str, name: str):
    """A function that drops client connections: on the shared server only those named
    ``name`` (other sessions share it), on a Cluster every client's (its nodes are this
    session's own). Returns how many it dropped."""
    import redis

    if not url.startswith("redis+cluster://"):
        admin = redis.Redis.from_url(url)

        def kill_named() -> int:
            mine = [c["id"] for c in admin.client_list() if c.get("name") == name]
            return sum(int(admin.client_kill_filter(_id=i) or 0) for i in mine)
        return kill_named, admin.close
    cluster = redis.cluster.RedisCluster.from_url("redis://" + url[len("redis+cluster://"):])
    nodes = [redis.Redis(host=n.host, port=n.port) for n in cluster.get_primaries()]

    def kill_all() -> int:
        return sum(int(n.client_kill_filter(_type="normal", skipme=True) or 0) for n in nodes)

    def close() -> None:
        for n in nodes:
            n.close()
        cluster.close()
    return kill_all, close


async def _until_available(call):  # type: ignore[no-untyped-def]
    """Await ``call()`` until it stops raising StateUnavailableError (past the client's own
    retries, the caller's)."""
    for _ in range(200):
        try:
            return await call()
        except StateUnavailableError:
            await asyncio.sleep(0.05)
    raise AssertionError("the state never came back")


# redis-py's async Cluster client drops the connections a server closed without closing their
# sockets; they are collected (and warned about) inside this test, not in a later one.
@pytest.mark.filterwarnings("ignore::ResourceWarning",
                            "ignore::pytest.PytestUnraisableExceptionWarning")
def test_many_coroutines_feeding_back_count_exactly_once(url):
    """400 feedbacks from 400 coroutines (50 in flight), every 10th sent twice, while a killer
    drops the client's connections: the counts equal the serial result exactly."""
    prefix, name = unique_prefix(), unique_prefix()
    born_ms = int(time.time() * 1000)
    plans = [p for w in range(4) for p in workers.plan(w, 100, born_ms)]
    state = RedisState(url, prefix=prefix)
    kill, close_killer = _killer(url, name)
    kills = [0]

    async def run() -> tuple[int, int, int]:
        aio = AsyncRedisState.from_url(f"{url}?prefix={prefix}&client_name={name}", retries=6)
        gate = asyncio.Semaphore(50)
        counted = replayed = repeated = 0

        async def one(j: int, imp, update) -> None:
            nonlocal counted, replayed, repeated
            async with gate:
                # Written again after a lost reply, the same impression completes the first write.
                assert await _until_available(lambda: aio.put_impression(imp)) == imp.recall_id
                (first,) = await _until_available(lambda: aio.apply([update]))
                # A reply lost after the script ran: the retry finds the items recorded, stale.
                counted += len(update.ranks)
                replayed += not first
                if j % 10 == 0:  # a client's own retry (awaited before the sum is read)
                    (again,) = await _until_available(lambda: aio.apply([update]))
                    assert not again
                    repeated += len(update.ranks)

        async def killer(done: asyncio.Event) -> None:
            for _ in range(40):
                await asyncio.sleep(0.1)
                if done.is_set():
                    break
                kills[0] += kill()

        done = asyncio.Event()
        kill_task = asyncio.create_task(killer(done))
        try:
            await asyncio.gather(*(one(j, imp, update) for j, (imp, update) in enumerate(plans)))
        finally:
            done.set()
            await kill_task
            await aio.aclose()
        return counted, replayed, repeated

    try:
        counted, replayed, repeated = asyncio.run(run())
        assert counted == len(plans) * 3 and repeated == 40 * 3
        # Not one increment lost or doubled.
        assert workers.snapshot(state) == workers.serial_snapshot(plans)
        assert state.stats()["feedbacks"] == len(plans)
        assert kills[0] > 0  # the connections really were dropped under the coroutines
        print(f"{kills[0]} connections dropped; {replayed} of {len(plans)} feedbacks retried "
              f"after their script had run, counted once")
    finally:
        close_killer()
        state.clear()
        state.close()
        gc.collect()


def test_concurrent_areranks_and_afeedbacks_through_the_reranker(url, no_threads):
    state = RedisState(url, prefix=unique_prefix())
    rr = Reranker(state)

    async def run() -> None:
        rankings = await asyncio.gather(*(
            rr.arerank(query, CANDIDATES, namespace=ns, k=3, now=NOW) for ns, query, _ in _session(60)))
        outcomes = await asyncio.gather(*(
            rr.afeedback(r.recall_id, used=[r.ids[used]], namespace=ns)
            for r, (ns, _, used) in zip(rankings, _session(60))))
        assert all(len(o.applied) == 3 for o in outcomes)

    try:
        _on_a_loop(state, run)
        assert state.stats()["feedbacks"] == 60
        uses = sum(state.read_docs(f"user{i}", [c["id"] for c in CANDIDATES]).use_count.sum()
                   for i in range(3))
        assert uses == 60
    finally:
        state.clear()
        state.close()


def test_async_degrades_while_the_server_is_down_and_a_retry_applies_once(aof_server, caplog):
    state = RedisState(aof_server.url, prefix=unique_prefix(), timeout_s=0.3, retries=1)
    rr = Reranker(state)
    strict = Reranker(state, strict=True)

    async def before() -> str:
        first = await rr.arerank(QUERIES[0], CANDIDATES, namespace="maya", k=2, now=NOW)
        assert (await rr.afeedback(first.recall_id, used=["lisbon"])).applied
        again = await rr.arerank(QUERIES[0], CANDIDATES, namespace="maya", k=2, now=NOW)
        return again.recall_id

    async def down(recall_id: str) -> None:
        with caplog.at_level(logging.WARNING, logger="heaprank"):
            ranking = await rr.arerank(QUERIES[0], CANDIDATES, namespace="maya", k=2, now=NOW)
        assert ranking.ids  # the retriever-plus-priors ranking
        assert all("state unavailable" in item.explain() for item in ranking.items)
        assert "state unavailable" in caplog.text
        with pytest.raises(StateUnavailableError):
            await strict.arerank(QUERIES[0], CANDIDATES, namespace="maya", now=NOW)
        with pytest.raises(StateUnavailableError):
            await rr.afeedback(recall_id, used=["lisbon"])

    async def after(recall_id: str) -> None:
        assert (await rr.afeedback(recall_id, used=["lisbon"])).applied
        assert (await rr.afeedback(recall_id, used=["lisbon"])).applied == ()

    recall_id = _on_a_loop(state, before)
    snapshot = workers.snapshot(state)
    aof_server.stop(hard=True)
    try:
        _on_a_loop(state, lambda: down(recall_id))
    finally:
        aof_server.start()
    assert workers.snapshot(state) == snapshot  # nothing was half-written while it was down
    _on_a_loop(state, lambda: after(recall_id))
    assert state.stats()["feedbacks"] == 2
    state.close()


def test_an_async_client_opened_alone_checks_the_layout(redis_url):
    prefix = unique_prefix()
    state = RedisState(redis_url, prefix=prefix, global_shards=4)

    async def run() -> None:
        wrong = AsyncRedisState.from_url(f"{redis_url}?prefix={prefix}&global_shards=8")
        with pytest.raises(ConfigError, match="global_shards=4"):
            await wrong.read("ns", ["kind:fact"], [])
        await wrong.aclose()
        right = AsyncRedisState.from_url(f"{redis_url}?prefix={prefix}&global_shards=4")
        counts, docs = await right.read("ns", ["kind:fact"], ["a"])
        assert counts.pos.tolist() == [0.0] and docs.use_count.tolist() == [0.0]
        await right.aclose()

    try:
        asyncio.run(run())
    finally:
        state.clear()
        state.close()


def test_each_event_loop_gets_its_own_async_client(redis_url):
    prefix = unique_prefix()
    state = RedisState(redis_url, prefix=prefix)
    rr = Reranker(state)

    async def once(last: bool) -> object:
        ranking = await rr.arerank(QUERIES[0], CANDIDATES, namespace="maya", k=2, now=NOW)
        await rr.afeedback(ranking.recall_id, used=["lisbon"])
        twin = state.async_backend()
        if last:
            await rr.aclose()  # this loop's async client, then the sync one
        else:
            await state.aclose_loop()  # this loop's async client only
        return twin

    first = asyncio.run(once(last=False))
    assert state.stats()["feedbacks"] == 1  # the sync client is still open
    second = asyncio.run(once(last=True))
    assert first is not second
    with RedisState(redis_url, prefix=prefix) as check:
        assert check.stats()["feedbacks"] == 2
        check.clear()


def test_a_state_given_a_client_runs_async_calls_in_a_thread(redis_url):
    import redis

    state = RedisState(client=redis.Redis.from_url(redis_url), prefix=unique_prefix())
    rr = Reranker(state)

    async def run() -> None:
        assert state.async_backend() is None
        ranking = await rr.arerank(QUERIES[0], CANDIDATES, namespace="maya", k=2, now=NOW)
        assert (await rr.afeedback(ranking.recall_id, used=["lisbon"])).applied

    try:
        asyncio.run(run())
        assert state.stats()["feedbacks"] == 1
    finally:
        state.clear()
        state.close()


def test_400_concurrent_async_calls_wait_for_a_connection_and_all_are_recorded(url):
    """400 asyncio tasks each awaiting arerank then afeedback at once, more than the client's
    connections: every rerank waits for a connection (none degrades to the priors) and every
    feedback is recorded (before: 84 reranks degraded, 100 of 400 feedbacks recorded)."""
    state = RedisState(url, prefix=unique_prefix())
    rr = Reranker(state)
    calls = 400

    async def one(i: int):  # type: ignore[no-untyped-def]
        ranking = await rr.arerank(QUERIES[i % 3], CANDIDATES, namespace=f"user{i % 7}", k=3,
                                   now=NOW + i)
        if ranking.degraded:
            return ranking, None
        return ranking, await rr.afeedback(ranking.recall_id, used=[ranking.ids[0]],
                                           now=NOW + i + 1)

    async def work():  # type: ignore[no-untyped-def]
        return await asyncio.gather(*(one(i) for i in range(calls)), return_exceptions=True)

    try:
        results = _on_a_loop(state, work)
        rankings = [r[0] for r in results if not isinstance(r, BaseException)]
        degraded = sum(r.degraded for r in rankings)
        recorded = state.stats()["feedbacks"]
        print(f"{calls} concurrent arerank + afeedback: {degraded} degraded reranks, "
              f"{recorded} of {calls} feedbacks recorded")
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert degraded == 0
        assert rr.stats()["degraded_reranks"] == 0
        assert recorded == calls
    finally:
        state.clear()
        state.close()


# (their sockets are closed by the collector, which warns that nobody closed them)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning",
                            "ignore::ResourceWarning")
def test_async_clients_of_ended_loops_are_released(redis_url):
    """Event loops that end without aclose(): the next loop's call drops their clients, and
    their connections with them (before: one client and its sockets kept per loop)."""
    state = RedisState(redis_url, prefix=unique_prefix())
    rr = Reranker(state)
    try:
        for i in range(3):  # three loops that end without aclose()
            asyncio.run(rr.arerank(QUERIES[0], CANDIDATES, namespace="u", k=2, now=NOW + i))
        _on_a_loop(state, lambda: rr.arerank(QUERIES[0], CANDIDATES, namespace="u", k=2,
                                             now=NOW))  # (a fourth that closes its own)
        gc.collect()
        assert len(state._async) == 0
    finally:
        state.clear()
        state.close()


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_rerank_that_finds_no_connection_in_time_says_so_on_its_result(redis_url):
    """One connection and a 1 ms wait for it (URL options): the reranks that find none free
    in time rank on the priors, and say so on the result and in stats(), not only in EXPLAIN."""
    prefix = unique_prefix()
    rr = Reranker(f"{redis_url}?prefix={prefix}&max_connections=1&pool_timeout=0.001")
    state = rr.state
    assert isinstance(state, RedisState) and state.pool.max_connections == 1

    async def work():  # type: ignore[no-untyped-def]
        return await asyncio.gather(*(rr.arerank(QUERIES[i % 3], CANDIDATES, namespace="u",
                                                 k=2, now=NOW) for i in range(50)))

    try:
        rankings = _on_a_loop(state, work)
        degraded = [r for r in rankings if r.degraded]
        assert 0 < len(degraded) < 50
        assert all("not tracked" in r.explain() for r in degraded)
        assert not any("not tracked" in r.explain() for r in rankings if not r.degraded)
        assert rr.stats()["degraded_reranks"] == len(degraded)
    finally:
        state.clear()
        state.close()


def test_the_async_client_reads_the_holders_and_keeps_a_rare_label_private(url, no_threads):
    """The async twin's read carries how many namespaces hold each pooled feature, as the sync
    client's does, and ``arerank`` masks by it: a kind and source only namespace A used give
    namespace B exactly the score of values nobody used (``Config.learning.pooled_min_namespaces``)."""
    state = RedisState(url, prefix=unique_prefix())
    rr = Reranker(state, config=Config(refit=Refit(every=0)))
    text = "My flight to Lisbon is on March 3"
    rare = {"id": "x", "text": text, "score": 1.0,
            "metadata": {"kind": "zorblax", "source": "acme-crm"}}
    unseen = {"id": "x", "text": text, "score": 1.0,
              "metadata": {"kind": "quux", "source": "other-crm"}}
    features = ["source:acme-crm", "kind:zorblax", "never:seen"]
    try:
        async def run() -> tuple:
            ranking = await rr.arerank(QUERIES[0], [rare, CANDIDATES[3]], namespace="A", now=NOW)
            await rr.afeedback(ranking.recall_id, used=["x"])
            twin = state.async_backend()
            held = (await twin.read_links("B", features)).holders.tolist()
            seen = (await rr.arerank(QUERIES[0], [rare], namespace="B", now=NOW, track=False))[0]
            other = (await rr.arerank(QUERIES[0], [unseen], namespace="B", now=NOW,
                                      track=False))[0]
            return held, seen, other

        held, seen, other = _on_a_loop(state, run)
        assert held == [1.0, 1.0, 0.0]
        assert state.read_links("B", features).holders.tolist() == [1.0, 1.0, 0.0]
        assert seen.score == other.score and seen.top_links == other.top_links
    finally:
        state.clear()
        rr.close()
