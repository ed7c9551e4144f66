"""``HeapRankRetriever``: any retriever (or vector store), re-ranked by heaprank, as a Runnable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
#: Keywords of one call from other packages, and what to pass instead.
CALL_RENAMED = {
    "top_n": "pass k= (how many documents come back)",
    "top_k": "pass k= (how many documents come back)",
    "n": "pass k= (how many documents come back)",
    "filter": "pass search_kwargs={'filter': ...} (with vectorstore=)",
}
#: What every call takes.
CALL_KEYWORDS = "it takes k=, namespace= and, with vectorstore=, fetch_k= and search_kwargs="


@dataclass(frozen=True, slots=True)
class _Call:
    """The keywords of one ``invoke``: how many come back, the namespace, the store search."""

    k: int
    namespace: str | None
    search: dict[str, Any]


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
    ``config=Config(scoring=Scoring(fusion_weights={"bm25": 1.0}))`` blends them. Any other
    retriever is invoked as is and ranked by its order (or the relevance its documents carry).

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
    """How many documents to return.

    One call takes ``k=``, ``namespace=`` (whose links rank it, and where its feedback goes:
    one retriever serves many users) and, with ``vectorstore``, ``fetch_k=`` and
    ``search_kwargs=``; any other keyword is a ``TypeError`` naming it."""

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

    def _fetch(self, query: str, kind: str, source: Any, search: dict[str, Any],
               run_manager: CallbackManagerForRetrieverRun) -> Fetched:
        if kind == "store":
            return _scored(source, source.similarity_search_with_score(query, **search))
        if kind == "vector":
            return _scored(source.vectorstore, source.vectorstore.similarity_search_with_score(
                query, **source.search_kwargs))
        if kind == "bm25":
            return _bm25_hits(source, query)
        if kind == "ensemble":
            return _fused(source, [self._fetch(query, *self._part(r), {}, run_manager)
                                   for r in source.retrievers])
        docs = source.invoke(query, config={"callbacks": run_manager.get_child()})
        return list(docs), None, None

    async def _afetch(self, query: str, kind: str, source: Any, search: dict[str, Any],
                      run_manager: AsyncCallbackManagerForRetrieverRun) -> Fetched:
        if kind == "store":
            return _scored(source, await source.asimilarity_search_with_score(query, **search))
        if kind == "vector":
            hits = await source.vectorstore.asimilarity_search_with_score(
                query, **source.search_kwargs)
            return _scored(source.vectorstore, hits)
        if kind == "bm25":
            return _bm25_hits(source, query)  # in-memory CPU work, no I/O to await
        if kind == "ensemble":
            return _fused(source, [await self._afetch(query, *self._part(r), {}, run_manager)
                                   for r in source.retrievers])
        docs = await source.ainvoke(query, config={"callbacks": run_manager.get_child()})
        return list(docs), None, None

    @staticmethod
    def _part(retriever: Any) -> tuple[str, Any]:
        return _kind(retriever), retriever

    def _call(self, kwargs: dict[str, Any]) -> _Call:
        """The keywords of one call, checked before anything is fetched.

        Raises:
            TypeError: a keyword it does not honour, named (with what to pass instead), or
                ``fetch_k`` / ``search_kwargs`` without ``vectorstore``.
            ValueError: ``k`` or ``fetch_k`` below 1, ``search_kwargs["k"]``.
        """
        given = dict(kwargs)
        k, namespace = given.pop("k", None), given.pop("namespace", None)
        fetch_k, search = given.pop("fetch_k", None), given.pop("search_kwargs", None)
        for name in given:
            raise TypeError(f"HeapRankRetriever.invoke: unknown keyword {name!r}; "
                            f"{CALL_RENAMED.get(name, CALL_KEYWORDS)}")
        if self.vectorstore is None and (fetch_k, search) != (None, None):
            name = "fetch_k" if fetch_k is not None else "search_kwargs"
            raise TypeError(f"HeapRankRetriever.invoke: {name!r} goes with vectorstore=; a "
                            "base_retriever decides what it fetches (configure it instead)")
        if search is not None and (not isinstance(search, dict) or "k" in search):
            raise ValueError("search_kwargs: a dict of the vector store's search options, without "
                             "'k' (pass fetch_k= or k=)")
        return _Call(_count("k", k, self.k), namespace,
                     {"k": _count("fetch_k", fetch_k, self.fetch_k), **self.search_kwargs,
                      **(search or {})})

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        call = self._call(kwargs)
        docs, scores, extra = self._fetch(query, *self._plan(), call.search, run_manager)
        return self.rank_documents(docs, query, scores=scores, extra_scores=extra,
                                   callbacks=run_manager.get_child(), top_n=call.k,
                                   namespace=call.namespace)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        call = self._call(kwargs)
        docs, scores, extra = await self._afetch(query, *self._plan(), call.search, run_manager)
        return await self.arank_documents(docs, query, scores=scores, extra_scores=extra,
                                          callbacks=run_manager.get_child(), top_n=call.k,
                                          namespace=call.namespace)


def _count(name: str, value: Any, default: int) -> int:
    """``value`` (a keyword of one call) as a count >= 1, or ``default`` when not given."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: must be an int >= 1, got {value!r}")
    return value
