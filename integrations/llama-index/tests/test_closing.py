"""The postprocessor closes its state: ``close()``, ``await aclose()`` (in the event loop, for a
Redis state's async client), and an event loop run by ``asyncio.run`` releases its own async
client when it ends, so ``aquery`` on Redis leaves no unclosed connection."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from li_support import NOW
from llama_index.postprocessor.heaprank import HeapRankFeedbackHandler, HeapRankPostprocessor

SCRIPT = textwrap.dedent("""
    import asyncio, gc, sys
    from llama_index.core import VectorStoreIndex
    from li_support import CitingLLM, HashedBagOfWords, memories
    from llama_index.postprocessor.heaprank import HeapRankFeedbackHandler, HeapRankPostprocessor

    def main():
        index = VectorStoreIndex.from_documents(memories(), embed_model=HashedBagOfWords())
        pp = HeapRankPostprocessor(state=sys.argv[1], top_n=3, citations=True)
        handler = HeapRankFeedbackHandler(pp).install()
        engine = index.as_query_engine(llm=CitingLLM(prompts=[], answer="[1]"),
                                       similarity_top_k=4, node_postprocessors=[pp])

        async def ask():
            await engine.aquery("When is my flight to Lisbon?")  # reranks in a worker thread
            await handler.aflush()
            nodes = await index.as_retriever(similarity_top_k=4).aretrieve("my flight")
            await pp.apostprocess_nodes(nodes, query_str="my flight")  # on the loop: arerank

        async def served():  # one long-lived loop, as a server has: closed at shutdown
            for _ in range(5):
                await ask()
            await pp.aclose()

        if sys.argv[2] == "loop-per-call":  # as a script or a test suite does: nothing to close
            for _ in range(5):
                asyncio.run(ask())
        else:
            asyncio.run(served())
        handler.uninstall()
        assert handler.failed == 0 and len(handler.reports) == 5, handler.reports

    main()
    gc.collect()  # what main() held is garbage now: an unclosed connection would say so here
    print("done")
""")


@pytest.mark.parametrize("loops", ["loop-per-call", "served"])
def test_aquery_on_redis_leaves_no_unclosed_connection(redis_url: str, tmp_path: Path,
                                                       loops: str) -> None:
    script = tmp_path / "aquery_redis.py"
    script.write_text(SCRIPT, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-W", "always::ResourceWarning", str(script), redis_url,
                           loops], capture_output=True, text=True, timeout=180, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-3000:]
    assert "ResourceWarning" not in proc.stderr, proc.stderr[-3000:]


def test_close_closes_the_state(tmp_path: Path) -> None:
    pp = HeapRankPostprocessor(state=f"sqlite:///{tmp_path / 's.db'}", now=NOW)
    pp.postprocess_nodes([NodeWithScore(node=TextNode(text="flight on March 14"), score=0.5)],
                         query_str="When is my flight?")
    assert (tmp_path / "s.db-wal").exists()  # an open SQLite connection in WAL mode
    pp.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]  # the last one closed


def test_aclose_closes_the_state_from_the_loop(redis_url: str) -> None:
    pp = HeapRankPostprocessor(state=redis_url, now=NOW)
    handler = HeapRankFeedbackHandler(pp)

    async def run() -> int:
        nodes = [NodeWithScore(node=TextNode(text="flight on March 14"), score=0.5)]
        out = await pp.apostprocess_nodes(nodes, QueryBundle("When is my flight?"))
        await pp.aclose()
        return len(out)

    assert asyncio.run(run()) == 1 and handler.failed == 0
