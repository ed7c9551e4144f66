"""``HeapRankRetriever``: any retriever (or vector store), re-ranked by heaprank, as a Runnable."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from .reranker import HeapRankOptions

#: What a source gives: documents, one relevance each (or None: their order), named scores each.
Fetched = tuple[list[Document], list[float] | None, list[dict[str, float]] | None]


def _relevance_fn(store: VectorStore) -> Callable[[float], float] | None:
    """The store's own map of a raw score to "higher is better", or None when its raw score
    already is a similarity (stores without a relevance function, e.g. InMemoryVectorStore)."""
    try:
        return store._select_relevance_score_fn()
    except NotImplementedError:
        return None


def _scored(store: VectorStore, hits: list[tuple[Document, float]]) -> Fetched:
    # Raw scores, mapped by the store's function but never checked against [0, 1]: heaprank
    # normalises over the candidate set (LangChain's relevance-score path warns on FAISS's).
    fn = _relevance_fn(store)
    scores = [float(fn(s)) if fn is not None else float(s) for _, s in hits]
    return [d for d, _ in hits], scores, [{"vector": s} for s in scores]


def _bm25_hits(bm25: Any, query: str) -> Fetched:
    """A ``BM25Retriever``'s top ``k`` with their BM25 scores (what its own search ranks by)."""
    scores = bm25.vectorizer.get_scores(bm25.preprocess_func(query))
    top = sorted(range(len(bm25.docs)), key=lambda i: -scores[i])[:bm25.k]
    return [bm25.docs[i] for i in top], [float(scores[i]) for i in top], \
        [{"bm25": float(scores[i])} for i in top]


def _kind(retriever: Any) -> str:
    """How to ask ``retriever`` for scores: ``vector``, ``bm25``, ``ensemble`` or ``plain``."""
    if isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "similarity":
        return "vector"
    names = {cls.__name__ for cls in type(retriever).__mro__}
    if "BM25Retriever" in names and hasattr(retriever, "vectorizer"):
        return "bm25"
    if "EnsembleRetriever" in names and hasattr(retriever, "weighted_reciprocal_rank"):
        return "ensemble"
    return "plain"


def _fused(ensemble: Any, parts: list[Fetched]) -> Fetched:
    """The ensemble's own weighted reciprocal-rank order, each document with every named score
    its retrievers gave it."""
    def key(doc: Document) -> Any:
        return doc.page_content if ensemble.id_key is None else doc.metadata[ensemble.id_key]

    named: dict[Any, dict[str, float]] = {}
    for docs, _, extra in parts:
        for doc, scores in zip(docs, extra or [{} for _ in docs]):
            named.setdefault(key(doc), {}).update(scores)
    docs = ensemble.weighted_reciprocal_rank([p[0] for p in parts])
    return docs, None, [named.get(key(d), {}) for d in docs]


class HeapRankRetriever(HeapRankOptions, BaseRetriever):
    """Retrieve with ``base_retriever`` (or ``vectorstore``), re-rank with heaprank, return ``k``.

    Scores are asked for wherever a retriever can give them: a vector store (or a similarity
    ``VectorStoreRetriever``) by ``similarity_search_with_score``, its raw score mapped by the
    store's own relevance function; a ``BM25Retriever`` by its BM25 scores; an
    ``EnsembleRetriever`` by each of its retrievers, in the ensemble's order. Each score also
    goes to ``metadata.retriever_scores`` (``"vector"``, ``"bm25"``, ``"upstream"``), so
    ``config=Config(fusion_weights={"bm25": 1.0})`` blends them. Any other retriever is invoked
    as is and ranked by its order (or the relevance its documents carry).

    Example:
        >>> hr = HeapRankRetriever(vectorstore=vs, state="sqlite:///heaprank.db", k=5)
        >>> chain = hr | format_docs | prompt | llm  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    base_retriever: SkipJsonSchema[RetrieverLike | None] = None
    """Any retriever Runnable (``str -> list[Document]``); it decides how many it fetches."""
    vectorstore: SkipJsonSchema[VectorStore | None] = None
    """A vector store to search directly, with scores (instead of ``base_retriever``)."""
    fetch_k: int = 50
    """How many candidates to fetch from ``vectorstore`` for re-ranking."""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Other keyword arguments of the ``vectorstore`` search (``filter``, ...)."""
    k: int = 4
    """How many documents to return (``invoke(q, k=...)`` for one call)."""

    @classmethod
    def _renamed_here(cls) -> dict[str, str]:
        return {"top_n": "pass k= (how many documents come back)",
                "reranker": "pass state= (and namespace=, metadata_keys=, ...) to the retriever"}

    @model_validator(mode="after")
    def _check(self) -> HeapRankRetriever:
        if (self.base_retriever is None) == (self.vectorstore is None):
            raise ValueError("base_retriever, vectorstore: give exactly one")
        for name in ("k", "fetch_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if "k" in self.search_kwargs:
            raise ValueError("search_kwargs['k']: pass fetch_k= (how many are fetched) or k= "
                             "(how many come back)")
        return self

    def _plan(self) -> tuple[str, Any]:
        if self.vectorstore is not None:
            return "store", self.vectorstore
        return _kind(self.base_retriever), self.base_retriever

    def _search(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return {"k": self.fetch_k, **self.search_kwargs, **kwargs}

    def _fetch(self, query: str, kind: str, source: Any, kwargs: dict[str, Any],
               run_manager: CallbackManagerForRetrieverRun) -> Fetched:
        if kind == "store":
            return _scored(source, source.similarity_search_with_score(query, **self._search(kwargs)))
        if kind == "vector":
            search = {**source.search_kwargs, **kwargs}
            return _scored(source.vectorstore, source.vectorstore.similarity_search_with_score(
                query, **search))
        if kind == "bm25":
            return _bm25_hits(source, query)
        if kind == "ensemble":
            return _fused(source, [self._fetch(query, *self._part(r), {}, run_manager)
                                   for r in source.retrievers])
        docs = source.invoke(query, config={"callbacks": run_manager.get_child()}, **kwargs)
        return list(docs), None, None

    async def _afetch(self, query: str, kind: str, source: Any, kwargs: dict[str, Any],
                      run_manager: AsyncCallbackManagerForRetrieverRun) -> Fetched:
        if kind == "store":
            hits = await source.asimilarity_search_with_score(query, **self._search(kwargs))
            return _scored(source, hits)
        if kind == "vector":
            hits = await source.vectorstore.asimilarity_search_with_score(
                query, **{**source.search_kwargs, **kwargs})
            return _scored(source.vectorstore, hits)
        if kind == "bm25":
            return _bm25_hits(source, query)  # in-memory CPU work, no I/O to await
        if kind == "ensemble":
            return _fused(source, [await self._afetch(query, *self._part(r), {}, run_manager)
                                   for r in source.retrievers])
        docs = await source.ainvoke(query, config={"callbacks": run_manager.get_child()}, **kwargs)
        return list(docs), None, None

    @staticmethod
    def _part(retriever: Any) -> tuple[str, Any]:
        return _kind(retriever), retriever

    def _k(self, kwargs: dict[str, Any]) -> int:
        k = kwargs.pop("k", None)
        if k is None:
            return self.k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k: must be an int >= 1, got {k!r}")
        return k

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        k = self._k(kwargs)
        docs, scores, extra = self._fetch(query, *self._plan(), kwargs, run_manager)
        return self.rank_documents(docs, query, scores=scores, extra_scores=extra,
                                   callbacks=run_manager.get_child(), top_n=k)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        k = self._k(kwargs)
        docs, scores, extra = await self._afetch(query, *self._plan(), kwargs, run_manager)
        return await self.arank_documents(docs, query, scores=scores, extra_scores=extra,
                                          callbacks=run_manager.get_child(), top_n=k)
