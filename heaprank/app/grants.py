"""``heaprank state grant`` and ``revoke``: which namespaces a database role may see and write
in a PostgreSQL state with row-level security on (docs/postgres.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .urls import POSTGRES_SCHEMES, UsageError


def _cmd_grant(args: argparse.Namespace) -> int:
    if args.url.split(":", 1)[0] not in POSTGRES_SCHEMES:
        raise UsageError(f"state {args.state_command}: a PostgreSQL URL is needed "
                         f"(postgresql://user@host:port/dbname?schema=...)")
    from ..state.postgres.admin import grant_url

    revoke = args.state_command == "revoke"
    counts = grant_url(args.url, args.role, args.namespace, revoke=revoke)
    if args.json:
        print(json.dumps(counts, indent=2))
    else:
        print(f"{'revoked' if revoke else 'granted'} {args.namespace} "
              f"{'from' if revoke else 'to'} {args.role} in schema {counts['schema']}: "
              f"the role holds {counts['grants']} grant(s)")
    return 0


def add_commands(state_sub: Any) -> None:
    """Add ``grant`` and ``revoke`` to the ``state`` command's subparsers."""
    for name, verb in (("grant", "let ROLE see and write"), ("revoke", "take back ROLE's grant "
                                                                        "of")):
        text = (f"{verb} NAMESPACE (ending in '*': every namespace with that prefix) in a "
                f"PostgreSQL state with row-level security on (migrate with ?rls=on)")
        parser = state_sub.add_parser(name, help=text, description=text)
        parser.add_argument("url", help="the PostgreSQL state, as its tables' owner")
        parser.add_argument("role", help="the database role of an application")
        parser.add_argument("namespace", help="a namespace, or a prefix ending in '*'")
        parser.add_argument("--json", action="store_true", help="print the counts as JSON")
        parser.set_defaults(func=_cmd_grant)
