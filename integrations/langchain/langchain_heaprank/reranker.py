"""``HeapRankReranker``: a LangChain document compressor that re-ranks with heaprank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from heaprank import Ranking, Reranker
from langchain_core.callbacks import (
    BaseCallbackManager,
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from ._convert import DEFAULT_METADATA_KEYS, KNOWN_FIELDS, Converted, logger, to_candidates

#: Name of the custom callback event that carries a ranking to :class:`HeapRankFeedbackHandler`.
RANKING_EVENT = "heaprank.ranking"
#: Run config metadata key that sets the namespace for one call.
NAMESPACE_METADATA_KEY = "heaprank_namespace"


def _in_run(callbacks: Callbacks | None) -> bool:
    # Custom events need a parent run: outside one, dispatching raises RuntimeError.
    return isinstance(callbacks, BaseCallbackManager) and callbacks.parent_run_id is not None


class HeapRankReranker(BaseDocumentCompressor):
    """Re-rank documents by relevance x recency x importance x learned usefulness x rules.

    Returns new ``Document`` objects (ids kept, the caller's untouched), best first, with the final
    score, rank, EXPLAIN line, heaprank id and recall id in metadata. Feed back what the answer
    used with :class:`~langchain_heaprank.HeapRankFeedbackHandler`, or directly with
    ``reranker.reranker.feedback(recall_id, used=[ids])``.

    Example:
        >>> from heaprank import Reranker
        >>> rr = HeapRankReranker(reranker=Reranker("sqlite:///memory.db"), top_n=3)
        >>> docs = rr.compress_documents(retriever.invoke(q), q)  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    reranker: Reranker = Field(default_factory=Reranker, exclude=True)
    """The heaprank engine and its learned state (in memory unless given one with a state URL)."""
    top_n: int | None = 3
    """How many documents to return; ``None`` keeps them all."""
    namespace: str = "default"
    """Whose learned links to use; run config metadata ``heaprank_namespace`` overrides it."""
    strict: bool = False
    """Raise on bad metadata instead of neutralising the signal (flagged in EXPLAIN and logged)."""
    metadata_keys: dict[str, str | None] = Field(default_factory=lambda: {**DEFAULT_METADATA_KEYS})
    """heaprank field -> Document metadata key (merged over the defaults; ``None`` ignores it)."""
    relevance_key: str | None = "relevance_score"
    """Metadata key of an upstream score; without one, relevance comes from the retriever's order."""
    score_key: str = "relevance_score"
    rank_key: str = "heaprank_rank"
    explain_key: str = "heaprank_explain"
    id_key: str = "heaprank_id"
    recall_id_key: str = "heaprank_recall_id"
    now: Any = None
    """Fixed current time (epoch, datetime or ISO) for tests and replays; the wall clock if None."""
    track: bool = True
    """Record the impression so feedback can follow (``False`` for read-only ranking)."""

    _engine: Reranker | None = PrivateAttr(default=None)

    @field_validator("metadata_keys", mode="after")
    @classmethod
    def _merge_keys(cls, keys: dict[str, str | None]) -> dict[str, str | None]:
        unknown = set(keys) - KNOWN_FIELDS
        if unknown:
            raise ValueError(f"metadata_keys: unknown heaprank field(s) {sorted(unknown)}; "
                             f"expected some of {sorted(KNOWN_FIELDS)}")
        return {**DEFAULT_METADATA_KEYS, **keys}

    @field_validator("top_n", mode="after")
    @classmethod
    def _check_top_n(cls, top_n: int | None) -> int | None:
        if top_n is not None and top_n < 1:
            raise ValueError(f"top_n: must be >= 1 or None, got {top_n}")
        return top_n

    @property
    def engine(self) -> Reranker:
        """The reranker with ``on_invalid`` set by :attr:`strict` (same state, same rules)."""
        wanted = "raise" if self.strict else "neutral"
        if self.reranker.config.on_invalid == wanted:
            return self.reranker
        if self._engine is None or self._engine.state is not self.reranker.state:
            self._engine = self.reranker.with_config(on_invalid=wanted)
        return self._engine

    def resolve_namespace(self, callbacks: Callbacks | None) -> str:
        """The run's ``heaprank_namespace`` metadata if set, else :attr:`namespace`."""
        if isinstance(callbacks, BaseCallbackManager):
            value = callbacks.metadata.get(NAMESPACE_METADATA_KEY)
            if value is not None:
                return str(value)
        return self.namespace

    def _rank(self, documents: Sequence[Document], query: str, scores: Sequence[float | None] | None,
              namespace: str, top_n: int | None) -> tuple[list[Document], dict[str, Any] | None]:
        if not documents:
            return [], None
        keys = {name: key for name, key in self.metadata_keys.items() if key is not None}
        converted = to_candidates(documents, scores, metadata_keys=keys,
                                  score_key=self.relevance_key, strict=self.strict)
        k = top_n if top_n is not None else len(converted.candidates)
        ranking = self.engine.rerank(query, converted.candidates, namespace=namespace, k=k,
                                     now=self.now, track=self.track)
        position = {cand["id"]: pos for cand, pos in zip(converted.candidates, converted.positions)}
        ranked = [documents[position[item.id]] for item in ranking]  # the caller's, best first
        return self._documents(ranked, converted, ranking), self._payload(ranked, ranking)

    def _documents(self, ranked: list[Document], converted: Converted,
                   ranking: Ranking) -> list[Document]:
        out = []
        for doc, item in zip(ranked, ranking):
            explain = item.explain()
            extra = converted.flags.get(item.id)
            if extra:
                explain += (" ! " if " ! " not in explain else "; ") + "; ".join(extra)
            if item.flags or extra:
                logger.warning("heaprank: %s: %s", item.id, "; ".join([*item.flags, *(extra or [])]))
            out.append(doc.model_copy(update={"metadata": {
                **doc.metadata,
                self.score_key: item.score, self.rank_key: item.rank,
                self.explain_key: explain, self.id_key: item.id,
                self.recall_id_key: ranking.recall_id,
            }}))
        return out

    def _payload(self, ranked: list[Document], ranking: Ranking) -> dict[str, Any] | None:
        if not self.track:
            return None
        shown = []
        for doc, item in zip(ranked, ranking):
            aliases = [str(doc.id)] if doc.id and str(doc.id) != item.id else []
            shown.append({"id": item.id, "aliases": aliases, "text": doc.page_content})
        return {"recall_id": ranking.recall_id, "namespace": ranking.namespace,
                "query": ranking.query, "shown": shown}

    def rank_documents(self, documents: Sequence[Document], query: str, *,
                       scores: Sequence[float | None] | None = None, callbacks: Callbacks | None = None,
                       top_n: int | None = None) -> list[Document]:
        """Re-rank ``documents``; ``scores`` (one per document, e.g. a vector store's relevance)
        take precedence over metadata. ``top_n`` overrides :attr:`top_n` for this call."""
        namespace = self.resolve_namespace(callbacks)
        docs, payload = self._rank(documents, query, scores, namespace,
                                   top_n if top_n is not None else self.top_n)
        if payload is not None and _in_run(callbacks):
            dispatch_custom_event(RANKING_EVENT, payload, config={"callbacks": callbacks})
        return docs

    async def arank_documents(self, documents: Sequence[Document], query: str, *,
                              scores: Sequence[float | None] | None = None,
                              callbacks: Callbacks | None = None,
                              top_n: int | None = None) -> list[Document]:
        """Async :meth:`rank_documents`. Scoring is CPU work of a millisecond or so, done inline
        rather than on a thread pool."""
        namespace = self.resolve_namespace(callbacks)
        docs, payload = self._rank(documents, query, scores, namespace,
                                   top_n if top_n is not None else self.top_n)
        if payload is not None and _in_run(callbacks):
            await adispatch_custom_event(RANKING_EVENT, payload, config={"callbacks": callbacks})
        return docs

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        """Re-rank ``documents`` for ``query`` and keep the top :attr:`top_n`."""
        return self.rank_documents(documents, query, callbacks=callbacks)

    async def acompress_documents(self, documents: Sequence[Document], query: str,
                                  callbacks: Callbacks | None = None) -> Sequence[Document]:
        """Async :meth:`compress_documents`, native (no thread hop)."""
        return await self.arank_documents(documents, query, callbacks=callbacks)

