"""Fixtures: an InMemoryVectorStore over a deterministic embedding, a reranker at a fixed time,
and the shared Redis server (``HEAPRANK_REDIS_URL``) for the async tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_heaprank import HeapRankReranker
from lc_support import MEMORIES, NOW, HashedBagOfWords


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default state is ./heaprank.db: never in the source tree, never from the caller's env.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HEAPRANK_STATE", raising=False)


@pytest.fixture
def store() -> InMemoryVectorStore:
    vs = InMemoryVectorStore(HashedBagOfWords())
    vs.add_documents([d.model_copy() for d in MEMORIES])
    return vs


@pytest.fixture
def reranker() -> HeapRankReranker:
    return HeapRankReranker(state="memory://", top_n=3, now=NOW)


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis state URL with a prefix of this test's own; its keys are deleted after."""
    redis = pytest.importorskip("redis")
    base = os.environ.get("HEAPRANK_REDIS_URL", "redis://127.0.0.1:6379/15")
    client = redis.Redis.from_url(base, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        if os.environ.get("HEAPRANK_REQUIRE_REDIS") == "1":
            pytest.fail(f"no Redis server answers at {base} ({exc})")
        pytest.skip(f"no Redis server answers at {base} ({exc})")
    prefix = f"lc-test-{uuid.uuid4().hex[:10]}"
    yield f"{base}?prefix={prefix}"
    keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()
