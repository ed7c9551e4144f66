"""Fixtures: an InMemoryVectorStore over a deterministic embedding, and a reranker at a fixed time."""

from __future__ import annotations

import pytest
from heaprank import Reranker
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_heaprank import HeapRankReranker
from lc_support import MEMORIES, NOW, HashedBagOfWords


@pytest.fixture
def store() -> InMemoryVectorStore:
    vs = InMemoryVectorStore(HashedBagOfWords())
    vs.add_documents([d.model_copy() for d in MEMORIES])
    return vs


@pytest.fixture
def reranker() -> HeapRankReranker:
    return HeapRankReranker(reranker=Reranker(), top_n=3, now=NOW)
