"""Stdio for the MCP server on the event loop's own pipe transports, without worker threads.

The SDK's ``stdio_server()`` reads each line and writes each answer in a worker thread (three
hand-offs per message); on a busy machine each hand-off waits for a core, which is most of
what serving over stdio adds to a call. Here stdin and stdout are the loop's pipe transports,
handed to that same ``stdio_server()`` as its streams, so the messages, their parsing and the
session are still the SDK's. As the SDK does, fd 0 reads the null device and fd 1 writes to
stderr while serving (stray output can never corrupt the wire) and both are restored after.

:func:`run_stdio` falls back to the SDK's own transport where this one does not apply: not
POSIX, stdin or stdout not a pipe, socket or terminal, or an SDK without the low-level server.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

#: Longest line read from stdin: a request larger than this ends the session.
MAX_LINE_BYTES = 64 * 2**20


class _Lines:
    """stdin as the async iterator of text lines ``stdio_server`` reads."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Wire:
    """stdout as the async file ``stdio_server`` writes its answers to."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@asynccontextmanager
async def _claimed() -> AsyncIterator[tuple[_Lines, _Wire]]:
    """stdin and stdout on the loop's transports; fd 0 and 1 diverted meanwhile."""
    loop = asyncio.get_running_loop()
    saved = os.dup(0), os.dup(1)
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    read_end, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                               os.fdopen(os.dup(0), "rb", buffering=0))
    write_end, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(os.dup(1), "wb", buffering=0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        yield _Lines(reader), _Wire(asyncio.StreamWriter(write_end, protocol, None, loop))
    finally:
        read_end.close()
        write_end.close()
        for fd, original in zip((0, 1), saved):
            os.dup2(original, fd)
            os.close(original)


async def run_stdio(server: MCPServer) -> None:
    """Serve ``server`` over this process's stdin and stdout until stdin closes."""
    lowlevel: Any = getattr(server, "_lowlevel_server", None)
    if os.name != "posix" or lowlevel is None or not (_pipe_like(0) and _pipe_like(1)):
        await server.run_stdio_async()
        return
    async with _claimed() as (lines, wire), \
            stdio_server(stdin=lines, stdout=wire) as (read, write):  # type: ignore[arg-type]
        await lowlevel.run(read, write, lowlevel.create_initialization_options())
