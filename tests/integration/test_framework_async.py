"""The framework packages' async paths on the real Redis server: the event loop keeps running.

A 1 ms ticker (:func:`benchmarks.speed.loop_lag.ticking`, the one ``python -m benchmarks loop-lag``
reports with) runs beside 100 concurrent calls of LangChain's ``acompress_documents``, a
LangChain chain's ``ainvoke`` with the feedback handler, and LlamaIndex's ``apostprocess_nodes``.
Had they called the core's sync ``rerank`` / ``feedback`` from the coroutine, the loop would
tick once for the whole batch: every call would finish in the loop iteration that started it (so
it did before 0.2: 1, 3 and 1 ticks). Awaiting Redis, a batch takes at least two iterations, and
the chain with its handler, which awaits ``afeedback`` too, many more (4, 25 and 4 ticks on the
shared host; the longest gap left is the calls' own CPU, about 1 ms each, run back to back).
"""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.speed import loop_lag

CALLS = 100
#: path -> (the package it needs, its workload, the fewest ticks a non-blocking run gives)
PATHS = {"langchain acompress_documents": ("langchain_heaprank", loop_lag.langchain_compress, 2),
         "langchain chain + feedback handler": ("langchain_heaprank", loop_lag.langchain_chain, 8),
         "llamaindex apostprocess_nodes": ("llama_index.postprocessor.heaprank",
                                           loop_lag.llamaindex_postprocess, 2)}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the frameworks' own, not heaprank's
@pytest.mark.parametrize("path", sorted(PATHS))
def test_concurrent_async_calls_let_the_loop_tick(path: str, redis_url: str) -> None:
    module, make, fewest = PATHS[path]
    pytest.importorskip(module)
    from heaprank import Reranker

    with loop_lag.redis_state(redis_url, name="fw-async") as url:
        result = asyncio.run(loop_lag.measure(make(url, CALLS)))  # a warm batch, then this one
        with Reranker(url) as engine:
            stats = engine.stats()
    assert stats["impressions"] == 2 * CALLS  # every call ranked on Redis
    if "feedback" in path:
        assert stats["feedbacks"] == 2 * CALLS  # and each chain's feedback went through afeedback
    assert result["ticks"] >= fewest, f"{path}: the loop ticked {result['ticks']} times"
