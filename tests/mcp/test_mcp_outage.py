"""A state outage is a tool error, and the next call works once the state is back: a real
Redis server (its own process, every write in its append-only file) stopped and started under
a running MCP server."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")
pytest.importorskip("redis")

from heaprank import Reranker  # noqa: E402
from heaprank.mcp import build_server  # noqa: E402
from tests.mcp.conftest import candidates, session  # noqa: E402

pytestmark = pytest.mark.slow


def test_a_redis_outage_is_a_tool_error_and_the_server_recovers(aof_server):
    args = {"query": "When does Maya's flight leave?", "candidates": candidates(), "k": 3}

    async def script(client):
        before = await client.call_tool("rerank", args)
        recall = before.structured_content["recall_id"]
        aof_server.stop()
        down = [await client.call_tool("rerank", args),
                await client.call_tool("feedback", {"recall_id": recall, "used": ["m1"]})]
        aof_server.start()
        fed = await client.call_tool("feedback", {"recall_id": recall, "used": ["m1"]})
        after = await client.call_tool("rerank", args)
        await reranker.aclose()  # (the state's async client of this event loop too)
        return down, fed, after

    reranker = Reranker(aof_server.url, strict=True)
    down, fed, after = session(build_server(reranker), script)
    for result in down:
        assert result.is_error
        text = result.content[0].text
        assert "Error executing tool" in text and "Traceback" not in text
        assert "unavailable" in text.lower() or "redis" in text.lower(), text
    assert not fed.is_error and fed.structured_content["recorded"]["used"] == 1
    assert not after.is_error and len(after.structured_content["results"]) == 3
