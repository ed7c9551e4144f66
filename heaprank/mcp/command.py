"""``heaprank mcp``: serve the tools over stdio (the default) or streamable HTTP.

This module imports nothing of the MCP SDK until the command runs, so ``heaprank --help``
works without the ``mcp`` extra, and ``heaprank mcp`` without it names the extra.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from .._checks import check_namespace
from .._optional import require
from ..errors import InputError

HELP = "serve rerank and feedback to agents over MCP (stdio, or --http; needs heaprank[mcp])"


def add_command(sub: Any) -> None:
    """Add ``mcp`` to the ``heaprank`` subcommands (``sub``: argparse's subparsers)."""
    p = sub.add_parser("mcp", help=HELP, description=HELP + ". Logs go to stderr.")
    p.add_argument("--state", help="state URL, shared with any other process (default "
                   "$HEAPRANK_STATE, else sqlite:///heaprank.db in the working directory)")
    p.add_argument("--config", help="config file (JSON, or TOML on Python 3.11+)")
    p.add_argument("--namespace", default="default",
                   help="the namespace a call without one uses (default: 'default')")
    p.add_argument("--http", metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--tokens", metavar="FILE", help="JSON file of bearer token -> [namespaces] "
                   "('*' for an operator); required to bind a non-loopback address")
    p.add_argument("--allow-forget", action="store_true",
                   help="offer the forget_namespace tool")
    p.add_argument("--keep-rankings", type=int, default=512, metavar="N",
                   help="recent rankings kept for why_not (default 512)")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
    p.set_defaults(func=run)


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as its host and port.

    Raises:
        InputError: no port, or one that is not a number from 1 to 65535.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise InputError(f"--http: expected HOST:PORT (e.g. 127.0.0.1:8765), got {text!r}")
    return host, int(port)


def run(args: argparse.Namespace) -> int:
    """Serve until stdin closes (stdio) or the process is interrupted (HTTP)."""
    require("mcp", extra="mcp", feature="heaprank mcp")
    import anyio

    from ..adapters import canonical_url, default_state_url
    from ..config import Config, load_config
    from ..reranker import Reranker
    from .server import ServerOptions, build_server, check_bind, serve
    from .tenants import TokenTable

    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format="heaprank mcp %(levelname)s %(name)s: %(message)s")
    check_namespace(args.namespace)
    if args.keep_rankings < 0:
        raise InputError(f"--keep-rankings: must be >= 0, got {args.keep_rankings}")
    tokens = TokenTable.load(args.tokens, args.namespace) if args.tokens else None
    if args.http is None and tokens is not None:
        raise InputError("--tokens: goes with --http (over stdio the process owner is trusted)")
    where = host_port(args.http) if args.http is not None else None
    url = "http://127.0.0.1"
    if where is not None:
        check_bind(where[0], tokens)
        url = f"http://{where[0]}:{where[1]}"
    config = load_config(args.config) if args.config else Config()
    state = canonical_url(args.state) if args.state else default_state_url()
    options = ServerOptions(namespace=args.namespace, allow_forget=args.allow_forget,
                            keep_rankings=args.keep_rankings, tokens=tokens, url=url,
                            log_level=args.log_level)
    # strict: a state outage is a tool error the agent sees, not a ranking that cannot learn
    reranker = Reranker(state, config=config, strict=True)
    server = build_server(reranker, options)
    logging.getLogger("heaprank.mcp").info("serving %s on %s", "HTTP" if where else "stdio",
                                           f"{url}/mcp" if where else "stdin/stdout")
    try:
        anyio.run(serve, server, reranker, where)
    except KeyboardInterrupt:
        pass
    return 0
