"""What the MCP tests share: a session of the SDK's own client with a server, and candidates.

The in-memory sessions speak the whole protocol (initialize, tools/list, tools/call) to a real
``MCPServer`` in this process; the subprocess tests start ``python -m heaprank mcp``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

pytest.importorskip("mcp", reason="the MCP tests need heaprank[mcp]")

from tests.integration.redis_servers import aof_server  # noqa: E402

__all__ = ["aof_server", "candidates", "session"]

T = TypeVar("T")


def session(server: Any, script: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``script(client)`` in one session of the SDK's in-memory client with ``server``."""
    from mcp import Client

    async def main() -> T:
        async with Client(server) as client:
            return await script(client)

    return asyncio.run(main())


def candidates() -> list[dict[str, Any]]:
    """Five memories as a retriever returns them, best first (with scores and metadata)."""
    texts = [("m1", "Maya's flight to Lisbon leaves on 3 May at 09:40", "fact", "maya"),
             ("m2", "Maya said she prefers window seats", "preference", "maya"),
             ("m3", "The hotel in Lisbon is booked from 3 to 7 May", "fact", "assistant"),
             ("m4", "Maya asked about flights last week", "event", "maya"),
             ("m5", "Lisbon has trams and many hills", "fact", "web")]
    return [{"id": i, "text": t, "score": 0.9 - 0.1 * n,
             "metadata": {"kind": kind, "source": source, "created_at": 1_700_000_000 + 3600 * n}}
            for n, (i, t, kind, source) in enumerate(texts)]
