"""Fixtures: an InMemoryVectorStore over a deterministic embedding, a reranker at a fixed time."""

from __future__ import annotations

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
