"""The retriever and the reranker close their state: ``close()``, ``await aclose()`` (in the
event loop, for a Redis state's async client), and an event loop run by ``asyncio.run`` releases
its own async client when it ends, so ``ainvoke`` on Redis leaves no unclosed connection."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_heaprank import HeapRankReranker, HeapRankRetriever
from lc_support import MEMORIES, NOW

QUERY = "When is my flight to Lisbon?"

SCRIPT = textwrap.dedent("""
    import asyncio, gc, sys
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_heaprank import HeapRankRetriever
    from lc_support import MEMORIES, HashedBagOfWords

    def main():
        store = InMemoryVectorStore(HashedBagOfWords())
        store.add_documents([d.model_copy() for d in MEMORIES])
        retriever = HeapRankRetriever(vectorstore=store, state=sys.argv[1], k=3)

        async def served():  # one long-lived loop, as a server has: closed at shutdown
            for _ in range(5):
                assert len(await retriever.ainvoke("When is my flight to Lisbon?")) == 3
            await retriever.aclose()

        if sys.argv[2] == "loop-per-call":  # as a script or a test suite does: nothing to close
            for _ in range(5):
                assert len(asyncio.run(retriever.ainvoke("When is my flight to Lisbon?"))) == 3
        else:
            asyncio.run(served())

    main()
    gc.collect()  # what main() held is garbage now: an unclosed connection would say so here
    print("done")
""")


@pytest.mark.parametrize("loops", ["loop-per-call", "served"])
def test_ainvoke_on_redis_leaves_no_unclosed_connection(redis_url: str, tmp_path: Path,
                                                        loops: str) -> None:
    script = tmp_path / "ainvoke_redis.py"
    script.write_text(SCRIPT, encoding="utf-8")
    tests = str(Path(__file__).parent)
    proc = subprocess.run([sys.executable, "-W", "always::ResourceWarning", str(script), redis_url,
                           loops], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [tests, os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-3000:]
    assert "ResourceWarning" not in proc.stderr, proc.stderr[-3000:]


def test_close_closes_the_state(tmp_path, store: InMemoryVectorStore) -> None:
    retriever = HeapRankRetriever(vectorstore=store, state=f"sqlite:///{tmp_path / 's.db'}", now=NOW)
    retriever.invoke(QUERY)
    assert (tmp_path / "s.db-wal").exists()  # an open SQLite connection in WAL mode
    retriever.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]  # the last one closed


def test_aclose_closes_the_state_from_the_loop(redis_url: str) -> None:
    import asyncio

    reranker = HeapRankReranker(state=redis_url, now=NOW)

    async def run() -> int:
        out = await reranker.acompress_documents([d.model_copy() for d in MEMORIES], QUERY)
        await reranker.aclose()
        return len(out)

    assert asyncio.run(run()) == 3
