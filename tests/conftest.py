"""Shared test setup: Hypothesis profiles and an environment scrubbed of ``HEAPRANK_*``."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# "ci" is the default: no deadline (SQLite and scipy calls vary with the machine's load) and a
# fixed example budget. "dev" is a quicker loop and "thorough" a bug hunt:
# HYPOTHESIS_PROFILE=thorough pytest tests/property
settings.register_profile("ci", deadline=None, max_examples=100, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=20)
settings.register_profile("thorough", deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


#: Settings that say where test services live (``.ci/run`` exports them); everything else
#: under ``HEAPRANK_`` is the developer's own configuration and must not leak into a test.
KEEP_ENV = frozenset({"HEAPRANK_REDIS_URL", "HEAPRANK_REQUIRE_REDIS", "HEAPRANK_REQUIRE_SPEEDUPS",
                      "HEAPRANK_PURE_PYTHON", "HEAPRANK_POSTGRES_URL", "HEAPRANK_REQUIRE_POSTGRES"})


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test without the caller's ``HEAPRANK_*`` settings leaking in."""
    for key in list(os.environ):
        if key.startswith("HEAPRANK_") and key not in KEEP_ENV:
            monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test PostgreSQL server's URL (skips, or fails when it is required, without one)."""
    from tests.postgres_server import reachable_url

    return reachable_url()


@pytest.fixture()
def postgres_schema(postgres_url):
    """A fresh schema name on the test server, dropped (with all it holds) afterwards."""
    from tests.postgres_server import drop_schema, unique_schema

    schema = unique_schema()
    yield schema
    drop_schema(postgres_url, schema)
