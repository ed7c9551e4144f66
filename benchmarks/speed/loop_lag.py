"""``python -m benchmarks loop-lag``: does the async path of the framework packages let the event
loop run, on a real Redis state?

A ticker coroutine sleeps 1 ms at a time while 100 concurrent calls run: LangChain's
``HeapRankReranker.acompress_documents``, a LangChain chain's ``ainvoke`` with the feedback
handler, and LlamaIndex's ``HeapRankPostprocessor.apostprocess_nodes``. A path that blocks the
loop lets it tick about once and its longest gap is the whole batch; a native async path ticks
while the Redis round trips are awaited. Prints ticks, the longest gap and the wall time of each.

Install: pip install -e ".[redis]" -e integrations/langchain -e integrations/llama-index
Run:     HEAPRANK_REDIS_URL=redis://127.0.0.1:6379/13 python -m benchmarks loop-lag [--calls 100]
(the keys it writes carry a prefix of their own and are deleted at the end)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

TEXTS = [f"memory {i}: the flight to city {i % 7} departs at {i % 12 + 1} o'clock" for i in range(20)]


async def ticking(calls: Callable[[], list[Awaitable[Any]]], period_s: float = 0.001) -> dict[str, float]:
    """Ticks of a 1 ms ticker and its longest gap while the awaitables of ``calls()`` run."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(period_s)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker starts before the calls
    start = time.perf_counter()
    await asyncio.gather(*calls())
    wall = time.perf_counter() - start
    done.set()
    await tick
    return {"ticks": len(gaps), "max_lag_ms": 1000 * max(gaps, default=0.0), "wall_ms": 1000 * wall}


def _langchain_reranker(url: str) -> Any:
    from langchain_heaprank import HeapRankReranker

    from heaprank import Reranker

    make: Any = HeapRankReranker  # either API: the figures compare this one with the one before
    if "state" in HeapRankReranker.model_fields:
        return make(state=url, top_n=5)
    return make(reranker=Reranker(url), top_n=5)  # the API before 0.2


#: What a workload gives: the calls of one batch (fresh awaitables each time), and its engine.
Workload = tuple[Callable[[], list[Awaitable[Any]]], Any]


def _engine(adapter: Any) -> Any:
    return adapter.engine if hasattr(adapter, "engine") else adapter.reranker  # before 0.2


def langchain_compress(url: str, n: int) -> Workload:
    from langchain_core.documents import Document

    rr = _langchain_reranker(url)
    docs = [Document(t, id=f"d{i}") for i, t in enumerate(TEXTS)]
    return (lambda: [rr.acompress_documents(docs, f"when does flight {i} leave?")
                     for i in range(n)]), _engine(rr)


def langchain_chain(url: str, n: int) -> Workload:
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda
    from langchain_heaprank import HeapRankFeedbackHandler

    rr = _langchain_reranker(url)
    docs = [Document(t, id=f"d{i}") for i, t in enumerate(TEXTS)]

    async def rank(query: str, config: Any) -> Any:
        found = await rr.acompress_documents(docs, query, callbacks=config.get("callbacks"))
        return {"heaprank_used": [found[0].id]}

    chain = RunnableLambda(rank)
    handler = HeapRankFeedbackHandler(rr)

    async def run(i: int) -> None:
        await chain.ainvoke(f"when does flight {i} leave?", config={"callbacks": [handler]})
        if hasattr(handler, "aflush"):
            await handler.aflush()

    return (lambda: [run(i) for i in range(n)]), _engine(rr)


def llamaindex_postprocess(url: str, n: int) -> Workload:
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.postprocessor.heaprank import HeapRankPostprocessor

    make: Any = HeapRankPostprocessor
    pp = make(**({"state": url} if "state" in make.model_fields else {"state_url": url}), top_n=5)
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 40)
             for i, t in enumerate(TEXTS)]
    engine = pp.engine
    return (lambda: [pp.apostprocess_nodes(nodes, query_str=f"when does flight {i} leave?")
                     for i in range(n)]), engine


async def measure(workload: Workload) -> dict[str, float]:
    """A warm batch (connections, feature cache), then the measured one, on one event loop;
    then the engine's clients of that loop are closed."""
    calls, engine = workload
    await ticking(calls)
    try:
        return await ticking(calls)
    finally:
        await engine.aclose()


class NoRedis(RuntimeError):
    """No Redis server answers (or redis-py is not installed)."""


@contextmanager
def redis_state(base: str | None = None, name: str = "looplag") -> Iterator[str]:
    """A Redis state URL on ``base`` (default ``$HEAPRANK_REDIS_URL``) with a key prefix of its
    own, whose keys are deleted on exit; the framework tests use it too.

    Raises:
        NoRedis: before yielding, when no server answers.
    """
    try:
        import redis
    except ImportError:
        raise NoRedis("the redis package is not installed (pip install 'heaprank[redis]')") from None
    base = base or os.environ.get("HEAPRANK_REDIS_URL", "redis://127.0.0.1:6379/15")
    client = redis.Redis.from_url(base, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise NoRedis(f"no Redis server answers at {base} ({exc})") from None
    prefix = f"{name}-{uuid.uuid4().hex[:10]}"
    try:
        yield f"{base}?prefix={prefix}"
    finally:
        keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=100)


def run(args: argparse.Namespace) -> int:
    with redis_state() as url:
        for name, make in (("langchain acompress_documents", langchain_compress),
                           ("langchain chain.ainvoke + feedback handler", langchain_chain),
                           ("llamaindex apostprocess_nodes", llamaindex_postprocess)):
            r = asyncio.run(measure(make(url, args.calls)))
            print(f"{name:<44} {args.calls} calls: {r['ticks']:4d} ticks, longest gap "
                  f"{r['max_lag_ms']:7.1f} ms, wall {r['wall_ms']:7.1f} ms")
    return 0
