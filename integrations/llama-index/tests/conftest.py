"""Fixtures: a VectorStoreIndex over a deterministic embedding, a citing LLM, a postprocessor, and
the shared Redis server (``HEAPRANK_REDIS_URL``) for the async tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core import VectorStoreIndex

from li_support import NOW, CitingLLM, HashedBagOfWords, memories
from llama_index.postprocessor.heaprank import HeapRankFeedbackHandler, HeapRankPostprocessor


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default state is ./heaprank.db: never in the source tree, never from the caller's env.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HEAPRANK_STATE", raising=False)


@pytest.fixture
def index() -> VectorStoreIndex:
    return VectorStoreIndex.from_documents(memories(), embed_model=HashedBagOfWords())


@pytest.fixture
def llm() -> CitingLLM:
    return CitingLLM(prompts=[])


@pytest.fixture
def postprocessor() -> HeapRankPostprocessor:
    return HeapRankPostprocessor(state="memory://", top_n=3, now=NOW)


@pytest.fixture
def handler(postprocessor: HeapRankPostprocessor) -> Iterator[HeapRankFeedbackHandler]:
    h = HeapRankFeedbackHandler(postprocessor).install()
    yield h
    h.uninstall()


@pytest.fixture
def redis_state() -> Iterator[str]:
    """A Redis state URL with a prefix of this test alone, its keys deleted after the test."""
    redis = pytest.importorskip("redis")
    server = os.environ.get("HEAPRANK_REDIS_URL", "redis://127.0.0.1:6379/15")
    client = redis.Redis.from_url(server, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        (pytest.fail if os.environ.get("HEAPRANK_REQUIRE_REDIS") == "1" else pytest.skip)(
            f"no Redis server answers at {server} ({exc})")
    name = f"li-test-{uuid.uuid4().hex[:10]}"
    try:
        yield f"{server}?prefix={name}"
    finally:
        for key in client.scan_iter(match=f"*{name}*", count=1000):
            client.delete(key)
        client.close()
