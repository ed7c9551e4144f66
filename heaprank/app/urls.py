"""Which state a command opens: a state it only reads must exist, and is opened read-only
(inspecting a state never creates or changes one)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from ..state import check_url, sqlite_path

REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster")
POSTGRES_SCHEMES = ("postgresql", "postgres")


class UsageError(Exception):
    """A mistake in the command line or in a file it names; printed as one line, exit 2."""


def existing_state(url: str) -> str:
    """``url`` if it names a state that exists, opened read-only: inspecting a state must never
    create or change one."""
    if url.startswith("sqlite:"):
        path = os.path.expanduser(sqlite_path(url))
        if not Path(path).is_file():
            raise UsageError(f"no state at {url!r} (file {path!r} does not exist); "
                             "pass --state or set HEAPRANK_STATE")
        return read_only(url, url.partition("?")[2])
    if url.split(":", 1)[0] in REDIS_SCHEMES + POSTGRES_SCHEMES:  # a missing one stays so
        return read_only(url, urlsplit(check_url(url)).query)
    return url


def read_only(url: str, query: str) -> str:
    """``url`` with ``mode=ro`` in its ``query`` (added unless it says so already)."""
    mode = [v for k, v in parse_qsl(query) if k == "mode"]
    if mode and mode != ["ro"]:
        raise UsageError(f"--state: mode={mode[-1]} in {url!r}, but this command only reads "
                         "the state and opens it read-only; drop mode= (or use mode=ro)")
    if mode:
        return url
    return url + ("&" if query else ("" if url.endswith("?") else "?")) + "mode=ro"
