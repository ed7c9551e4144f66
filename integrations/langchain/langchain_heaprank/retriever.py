"""``HeapRankRetriever``: any retriever (or vector store), re-ranked by heaprank, as a Runnable."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import ConfigDict, Field, model_validator

from .reranker import HeapRankReranker

# Search types whose hits can come with relevance scores from the store.
_SCORED_SEARCH = ("similarity", "similarity_score_threshold")


def _scored_hits(store: VectorStore, query: str, search: dict[str, Any]) -> list[tuple[Document, float]]:
    try:
        return store.similarity_search_with_relevance_scores(query, **search)
    except NotImplementedError:
        # Stores without a relevance function (InMemoryVectorStore) return raw cosine similarity,
        # which is already "higher is better".
        search = {k: v for k, v in search.items() if k != "score_threshold"}
        return store.similarity_search_with_score(query, **search)


async def _ascored_hits(store: VectorStore, query: str,
                        search: dict[str, Any]) -> list[tuple[Document, float]]:
    try:
        return await store.asimilarity_search_with_relevance_scores(query, **search)
    except NotImplementedError:
        search = {k: v for k, v in search.items() if k != "score_threshold"}
        return await store.asimilarity_search_with_score(query, **search)


class HeapRankRetriever(BaseRetriever):
    """Retrieve with ``base_retriever`` (or ``vectorstore``), then re-rank with ``reranker``.

    A vector store, or a plain similarity ``VectorStoreRetriever``, is asked for relevance scores
    (``similarity_search_with_relevance_scores``; stores without a relevance function give
    ``similarity_search_with_score``, read as higher-is-better): relevance from scores keeps
    information that relevance from rank order loses. Any other retriever is invoked as is and
    ranked by its order (or by ``reranker.relevance_key`` in metadata).

    Example:
        >>> hr = HeapRankRetriever(base_retriever=vs.as_retriever(search_kwargs={"k": 50}),
        ...                        reranker=HeapRankReranker(top_n=5))  # doctest: +SKIP
        >>> chain = hr | format_docs | prompt | llm  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base_retriever: RetrieverLike | None = None
    """Any retriever Runnable (``str -> list[Document]``)."""
    vectorstore: VectorStore | None = None
    """A vector store to search directly, with scores (instead of ``base_retriever``)."""
    search_kwargs: dict[str, Any] = Field(default_factory=lambda: {"k": 50})
    """Keyword arguments of the vector store search when ``vectorstore`` is given."""
    reranker: HeapRankReranker = Field(default_factory=HeapRankReranker)
    k: int | None = None
    """How many documents to return; overrides ``reranker.top_n`` (``invoke(q, k=...)`` too)."""

    @model_validator(mode="after")
    def _one_source(self) -> HeapRankRetriever:
        if (self.base_retriever is None) == (self.vectorstore is None):
            raise ValueError("base_retriever, vectorstore: give exactly one")
        if self.k is not None and self.k < 1:
            raise ValueError(f"k: must be >= 1 or None, got {self.k}")
        return self

    def _scored_source(self) -> tuple[VectorStore, dict[str, Any]] | None:
        if self.vectorstore is not None:
            return self.vectorstore, self.search_kwargs
        base = self.base_retriever
        if isinstance(base, VectorStoreRetriever) and base.search_type in _SCORED_SEARCH:
            return base.vectorstore, base.search_kwargs
        return None

    def _top_n(self, kwargs: dict[str, Any]) -> int | None:
        k = kwargs.pop("k", None)
        return k if k is not None else self.k

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        top_n = self._top_n(kwargs)
        scores: list[float | None] | None = None
        scored = self._scored_source()
        if scored is not None:
            store, search = scored
            hits = _scored_hits(store, query, {**search, **kwargs})
            docs, scores = [d for d, _ in hits], [s for _, s in hits]
        else:
            assert self.base_retriever is not None  # by _one_source
            docs = self.base_retriever.invoke(query, config={"callbacks": run_manager.get_child()},
                                              **kwargs)
        return self.reranker.rank_documents(docs, query, scores=scores,
                                            callbacks=run_manager.get_child(), top_n=top_n)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        top_n = self._top_n(kwargs)
        scores: list[float | None] | None = None
        scored = self._scored_source()
        if scored is not None:
            store, search = scored
            hits = await _ascored_hits(store, query, {**search, **kwargs})
            docs, scores = [d for d, _ in hits], [s for _, s in hits]
        else:
            assert self.base_retriever is not None
            docs = await self.base_retriever.ainvoke(
                query, config={"callbacks": run_manager.get_child()}, **kwargs)
        return await self.reranker.arank_documents(docs, query, scores=scores,
                                                   callbacks=run_manager.get_child(), top_n=top_n)
