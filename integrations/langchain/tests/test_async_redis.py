"""The async paths on a real Redis state: the event loop keeps running while they await.

A ticker sleeps 1 ms at a time beside 100 concurrent calls. On the sync path (the core's
``rerank``/``feedback`` called from a coroutine) it ticks about once: the loop is blocked for the
whole batch. Figures of the gap: ``python -m benchmarks.loop_lag`` from the repository root.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from langchain_heaprank import HeapRankFeedbackHandler, HeapRankReranker

DOCS = [Document(f"memory {i}: the flight to city {i % 7} departs at {i % 12 + 1}", id=f"d{i}")
        for i in range(20)]
CALLS = 100


async def _ticks_during(calls: list[Awaitable[Any]]) -> int:
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await asyncio.gather(*calls)
    done.set()
    await task
    return ticks


def test_concurrent_acompress_documents_let_the_loop_tick(redis_url: str) -> None:
    rr = HeapRankReranker(state=redis_url, top_n=5)

    async def run() -> tuple[int, int]:
        ticks = await _ticks_during([rr.acompress_documents(DOCS, f"when does flight {i} leave?")
                                     for i in range(CALLS)])
        return ticks, rr.engine.stats()["impressions"]

    ticks, impressions = asyncio.run(run())
    assert impressions == CALLS
    assert ticks >= 5, f"the loop ticked {ticks} times during {CALLS} concurrent calls"


def test_concurrent_chains_give_feedback_without_blocking_the_loop(redis_url: str) -> None:
    rr = HeapRankReranker(state=redis_url, top_n=5)
    handler = HeapRankFeedbackHandler(rr)

    async def rank(query: str, config: Any) -> dict[str, Any]:
        found = await rr.acompress_documents(DOCS, query, callbacks=config.get("callbacks"))
        return {"heaprank_used": [found[0].id]}

    chain = RunnableLambda(rank)

    async def run() -> int:
        ticks = await _ticks_during([chain.ainvoke(f"when does flight {i} leave?",
                                                   config={"callbacks": [handler]})
                                     for i in range(CALLS)])
        await handler.aflush()
        return ticks

    ticks = asyncio.run(run())
    assert rr.engine.stats()["feedbacks"] == CALLS and handler.failed == 0
    assert sum(len(r) for r in handler.reports.values()) == CALLS
    assert ticks >= 5, f"the loop ticked {ticks} times during {CALLS} concurrent chains"
