"""Fixtures: a VectorStoreIndex over a deterministic embedding, a citing LLM, a postprocessor."""

from __future__ import annotations

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
