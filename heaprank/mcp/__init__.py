"""heaprank for agents: an MCP server whose ``rerank`` and ``feedback`` tools learn.

Run it with ``heaprank mcp`` (stdio) or ``heaprank mcp --http 127.0.0.1:8765`` (streamable
HTTP); build it in your own process with :func:`build_server`. Needs ``heaprank[mcp]``:

- :mod:`heaprank.mcp.tools`: the tools, thin over :class:`~heaprank.Reranker`;
- :mod:`heaprank.mcp.models`: what they take and return (their JSON schemas);
- :mod:`heaprank.mcp.tenants`: who calls, and which namespaces a bearer token may name;
- :mod:`heaprank.mcp.server`: the SDK's ``MCPServer`` with the tools, and the transports;
- :mod:`heaprank.mcp.command`: the ``heaprank mcp`` command line.

See docs/mcp.md.
"""

from __future__ import annotations

from typing import Any

from .._optional import require

__all__ = ["Caller", "ServerOptions", "TokenTable", "build_server"]


def __getattr__(name: str) -> Any:
    """The server's names on first use, so importing this package never needs the SDK."""
    if name in ("ServerOptions", "build_server"):
        require("mcp", extra="mcp", feature="heaprank.mcp")
        from . import server

        return getattr(server, name)
    if name in ("Caller", "TokenTable"):
        from . import tenants

        return getattr(tenants, name)
    raise AttributeError(f"module 'heaprank.mcp' has no attribute {name!r}")
