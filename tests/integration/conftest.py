"""Fixtures of the integration tests: the Redis servers live in ``redis_servers``, a PostgreSQL
server a test stops and starts in ``postgres_servers``; ``state``
is a fresh backend of each kind (memory, a real SQLite file, the real Redis server, a schema of
its own on the real PostgreSQL server)."""

import pytest

from heaprank import MemoryState, SQLiteState
from tests.integration.postgres_servers import private_postgres
from tests.integration.redis_servers import aof_server, redis_cluster_url, redis_url, unique_prefix

__all__ = ["aof_server", "private_postgres", "redis_cluster_url", "redis_url", "state"]


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
def state(request, tmp_path):
    if request.param == "memory":
        backend = MemoryState()
    elif request.param == "sqlite":
        backend = SQLiteState(tmp_path / "state.db")
    elif request.param == "postgres":
        from heaprank.state.postgres import PostgresState

        backend = PostgresState(request.getfixturevalue("postgres_url"),
                                schema=request.getfixturevalue("postgres_schema"))
    else:
        from heaprank.state.redis import RedisState

        backend = RedisState(request.getfixturevalue("redis_url"), prefix=unique_prefix())
    yield backend
    if hasattr(backend, "clear"):
        backend.clear()
    backend.close()
