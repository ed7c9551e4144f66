"""The PostgreSQL server of the tests, named by ``HEAPRANK_POSTGRES_URL`` (default: the ``test``
database on 127.0.0.1:5432 as ``postgres``). Each test works in a schema of its own, random,
dropped afterwards.

Without a reachable server (or without psycopg) the PostgreSQL tests skip, naming why, unless
``HEAPRANK_REQUIRE_POSTGRES=1``: then they fail.
"""

from __future__ import annotations

import os
import uuid

import pytest

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def server_url() -> str:
    return os.environ.get("HEAPRANK_POSTGRES_URL") or DEFAULT_URL


def unavailable(reason: str) -> None:
    """Skip (or fail, when PostgreSQL is required) with ``reason``."""
    if os.environ.get("HEAPRANK_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"HEAPRANK_REQUIRE_POSTGRES=1 but {reason}")
    pytest.skip(reason)


def reachable_url() -> str:
    """The server's URL once a connection to it works (else skip or fail, naming why)."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'heaprank[postgres]')")
    url = server_url()
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        unavailable(f"no PostgreSQL server at {url} ({' '.join(str(exc).split())[:120]}); "
                    f"set HEAPRANK_POSTGRES_URL")
    return url


def unique_schema() -> str:
    """A schema name no other test run uses."""
    return f"hrtest_{uuid.uuid4().hex[:12]}"


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def state_url(url: str, schema: str, **options: object) -> str:
    """The heaprank URL of ``schema`` on the server at ``url``."""
    query = "&".join(f"{k}={v}" for k, v in {"schema": schema, **options}.items())
    return f"{url}{'&' if '?' in url else '?'}{query}"
