"""Fixtures: an InMemoryVectorStore over a deterministic embedding, a reranker at a fixed time,
a state on the real Redis server."""

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
    """A state URL on the real Redis server of ``$HEAPRANK_REDIS_URL`` (default db 15 on
    localhost), with a key prefix of its own whose keys are deleted after the test."""
    redis = pytest.importorskip("redis")
    base = os.environ.get("HEAPRANK_REDIS_URL", "redis://127.0.0.1:6379/15")
    client = redis.Redis.from_url(base, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        pytest.skip(f"no Redis server answers at {base} ({exc})")
    prefix = f"it22-{uuid.uuid4().hex[:10]}"
    try:
        yield f"{base}?prefix={prefix}"
    finally:
        keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
