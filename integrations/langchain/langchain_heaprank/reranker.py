"""``HeapRankReranker``: a LangChain document compressor that re-ranks with heaprank, and the
options (state, namespace, keys) it shares with ``HeapRankRetriever``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from heaprank import Config, Ranking, Reranker
from heaprank.adapters import (
    BoundState,
    EngineSpec,
    LoopClients,
    StateMismatchWarning,
    call_namespace,
    check_metadata_keys,
    explained,
    reject_renamed,
    relative_scores,
    surely_different,
    warn_at_caller,
)
from langchain_core.callbacks import (
    BaseCallbackManager,
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    PrivateAttr,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from ._convert import (
    DEFAULT_METADATA_KEYS,
    RAW_SCORE_KEY,
    RETRIEVAL_SCORE_KEY,
    Converted,
    logger,
    to_candidates,
)

#: Name of the custom callback event that carries a ranking to :class:`HeapRankFeedbackHandler`.
RANKING_EVENT = "heaprank.ranking"
#: Run config metadata key that sets the namespace for one call.
NAMESPACE_METADATA_KEY = "heaprank_namespace"
#: Keywords of older versions or other packages, and what to pass instead.
RENAMED = {
    "reranker": "pass state=Reranker(...) or state='sqlite:///path.db'",
    "state_url": "pass state='sqlite:///path.db'",
    "top_k": "pass top_n= (HeapRankReranker) or k= (HeapRankRetriever)",
}


def _in_run(callbacks: Callbacks | None) -> bool:
    # Custom events need a parent run: outside one, dispatching raises RuntimeError.
    return isinstance(callbacks, BaseCallbackManager) and callbacks.parent_run_id is not None


class HeapRankOptions(BaseModel):
    """What :class:`HeapRankReranker` and :class:`~langchain_heaprank.HeapRankRetriever` share:
    the learned state, the namespace, how metadata is read and where results are written."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    state: str | SkipJsonSchema[InstanceOf[Reranker]] | None = None
    """Learned state: a URL (``sqlite:///path.db``, ``redis://host:6379/0``, ``memory://``) or a
    :class:`heaprank.Reranker`. ``None``: ``$HEAPRANK_STATE``, else ``sqlite:///heaprank.db``
    in the working directory (what the ``heaprank`` command reads by default). After
    construction it holds the state's URL."""
    config: SkipJsonSchema[InstanceOf[Config] | None] = Field(default=None, exclude=True)
    """heaprank settings (``Config(scoring=Scoring(fusion_weights={"bm25": 1.0}))``) with a state URL."""
    namespace: str = "default"
    """Whose learned links to use; for one call, ``invoke(q, namespace=...)`` or the run config
    metadata ``heaprank_namespace`` (the keyword wins)."""
    strict: bool = False
    """Raise on bad metadata instead of neutralising the signal (flagged in EXPLAIN and logged)."""
    metadata_keys: dict[str, str | None] = Field(default_factory=lambda: {**DEFAULT_METADATA_KEYS})
    """heaprank field -> Document metadata key (merged over the defaults; ``None`` ignores it)."""
    relevance_key: str | None = "relevance_score"
    """Metadata key of an upstream reranker's relevance (read unless heaprank wrote it)."""
    score_key: str = "relevance_score"
    """Where the [0, 1] relevance goes: 1.0 for the best, ``s / s_best`` for the others."""
    rank_key: str = "heaprank_rank"
    explain_key: str = "heaprank_explain"
    id_key: str = "heaprank_id"
    recall_id_key: str = "heaprank_recall_id"
    now: Any = None
    """Fixed current time (epoch, datetime or ISO) for tests and replays; the wall clock if None."""
    track: bool = True
    """Record the impression so feedback can follow (``False`` for read-only ranking)."""

    _bound: BoundState | None = PrivateAttr(default=None)
    _warned: set[str] = PrivateAttr(default_factory=set)
    _loops: LoopClients | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            reject_renamed(cls.__name__, data, {**RENAMED, **cls._renamed_here()})
        return data

    @classmethod
    def _renamed_here(cls) -> dict[str, str]:
        return {}

    @field_validator("metadata_keys", mode="after")
    @classmethod
    def _merge_keys(cls, keys: dict[str, str | None]) -> dict[str, str | None]:
        return check_metadata_keys(keys, DEFAULT_METADATA_KEYS)

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self._bound = BoundState.open(self.state, owner=f"{type(self).__name__}.state",
                                      config=self.config)
        self.state = self._bound.url  # from here on, the URL the state reopens from
        self._loops = LoopClients(self._bound.engine)

    @property
    def engine(self) -> Reranker:
        """The :class:`heaprank.Reranker`: ``engine.feedback(recall_id, used=[...])``,
        ``engine.links(namespace)``, ``engine.close()``."""
        assert self._bound is not None  # set in model_post_init
        return self._bound.engine

    @property
    def state_key(self) -> str:
        assert self._bound is not None
        return self._bound.key

    def close(self) -> None:
        """Close the learned state (the engine's, also when you passed the engine)."""
        self.engine.close()

    async def aclose(self) -> None:
        """:meth:`close` from the event loop, releasing that loop's async client of a Redis
        state too (a loop run by ``asyncio.run`` releases its own when it ends)."""
        await self.engine.aclose()

    def __getstate__(self) -> dict[Any, Any]:
        # The engine holds connections and locks: a pickle carries its URL and settings.
        state = super().__getstate__()
        private = dict(state.get("__pydantic_private__") or {})
        private["_bound"] = EngineSpec.of(self.engine, owner=f"pickling {type(self).__name__}")
        private["_loops"] = None  # made anew with the engine it reopens
        state["__pydantic_private__"] = private
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        private = dict(state.get("__pydantic_private__") or {})
        spec = private.get("_bound")
        if isinstance(spec, EngineSpec):
            private["_bound"] = BoundState(spec.open(), state["__dict__"].get("state"))
            private["_loops"] = LoopClients(private["_bound"].engine)
        super().__setstate__({**state, "__pydantic_private__": private})

    def _ranking_engine(self) -> Reranker:
        assert self._bound is not None
        return self._bound.ranking(self.strict)

    def resolve_namespace(self, callbacks: Callbacks | None, given: str | None = None) -> str:
        """``given`` (a keyword of the call) if not None, else the run's ``heaprank_namespace``
        metadata if set, else :attr:`namespace`.

        Raises:
            InputTypeError, InputError: ``given`` is not a namespace (not a string, empty, ...).
        """
        if given is not None:
            return call_namespace(given, self.namespace)
        if isinstance(callbacks, BaseCallbackManager):
            value = callbacks.metadata.get(NAMESPACE_METADATA_KEY)
            if value is not None:
                return str(value)
        return self.namespace

    # ------------------------------------------------------------ ranking

    def _convert(self, documents: Sequence[Document], scores: Sequence[float] | None,
                 extra: Sequence[Mapping[str, float]] | None) -> Converted:
        keys = {name: key for name, key in self.metadata_keys.items() if key is not None}
        return to_candidates(documents, scores, extra, metadata_keys=keys,
                             relevance_key=self.relevance_key, strict=self.strict)

    def _documents(self, documents: Sequence[Document], converted: Converted,
                   ranking: Ranking) -> list[Document]:
        where = {cand["id"]: i for i, cand in enumerate(converted.candidates)}
        out = []
        for item, relevance, explain in zip(ranking, relative_scores([r.score for r in ranking]),
                                            explained(ranking, converted.flags, logger)):
            i = where[item.id]
            doc = documents[converted.positions[i]]
            meta = {**doc.metadata, self.score_key: relevance, RAW_SCORE_KEY: item.score,
                    self.rank_key: item.rank, self.explain_key: explain, self.id_key: item.id,
                    self.recall_id_key: ranking.recall_id}
            if converted.upstream[i] is not None:
                meta[RETRIEVAL_SCORE_KEY] = converted.upstream[i]
            out.append(doc.model_copy(update={"metadata": meta}))  # keeps Document.id
        return out

    def _payload(self, ranked: list[Document], ranking: Ranking) -> dict[str, Any]:
        shown = []
        for doc, item in zip(ranked, ranking):
            aliases = [str(doc.id)] if doc.id and str(doc.id) != item.id else []
            shown.append({"id": item.id, "aliases": aliases, "text": doc.page_content})
        return {"recall_id": ranking.recall_id, "namespace": ranking.namespace,
                "query": ranking.query, "state": self.state_key, "shown": shown}

    def _announce(self, callbacks: Callbacks | None) -> bool:
        """Whether to send the ranking event; warns once when the run's heaprank handlers all
        hold another state (their feedback could not be recorded)."""
        if not self.track or not _in_run(callbacks):
            return False
        assert isinstance(callbacks, BaseCallbackManager)
        keys = [h.heaprank_state_key for h in callbacks.handlers if hasattr(h, "heaprank_state_key")]
        mine = self.state_key
        if keys and all(surely_different(mine, k) for k in keys) and mine not in self._warned:
            self._warned.add(mine)
            message = (f"{type(self).__name__}: the run's HeapRankFeedbackHandler holds another "
                       f"state than this reranker ({self.state!r}); its feedback cannot be "
                       "recorded. Build the handler from this object: "
                       "HeapRankFeedbackHandler(retriever_or_reranker)")
            logger.warning("heaprank: %s", message)
            warn_at_caller(message, StateMismatchWarning)
        return True

    def rank_documents(self, documents: Sequence[Document], query: str, *,
                       scores: Sequence[float] | None = None,
                       extra_scores: Sequence[Mapping[str, float]] | None = None,
                       callbacks: Callbacks | None = None, top_n: int | None = None,
                       namespace: str | None = None) -> list[Document]:
        """Re-rank ``documents`` for ``query`` and return the best ``top_n`` (all if None).

        Args:
            scores: The retriever's relevance, one per document (higher is better); else the
                relevance the documents carry, else their order.
            extra_scores: Named scores per document (``{"bm25": 7.1}``) for ``scoring.fusion_weights``.
            namespace: This call's namespace (see :meth:`resolve_namespace`).
        """
        ns = self.resolve_namespace(callbacks, namespace)
        if not documents:
            return []
        converted = self._convert(documents, scores, extra_scores)
        ranking = self._ranking_engine().rerank(
            query, converted.candidates, namespace=ns,
            k=top_n or len(converted.candidates), now=self.now, track=self.track)
        docs = self._documents(documents, converted, ranking)
        if self._announce(callbacks):
            dispatch_custom_event(RANKING_EVENT, self._payload(docs, ranking),
                                  config={"callbacks": callbacks})
        return docs

    async def arank_documents(self, documents: Sequence[Document], query: str, *,
                              scores: Sequence[float] | None = None,
                              extra_scores: Sequence[Mapping[str, float]] | None = None,
                              callbacks: Callbacks | None = None,
                              top_n: int | None = None,
                              namespace: str | None = None) -> list[Document]:
        """Async :meth:`rank_documents` on the core's ``arerank`` (a Redis state's round trips
        are awaited on the event loop)."""
        ns = self.resolve_namespace(callbacks, namespace)
        if not documents:
            return []
        converted = self._convert(documents, scores, extra_scores)
        assert self._loops is not None
        await self._loops.enter()
        ranking = await self._ranking_engine().arerank(
            query, converted.candidates, namespace=ns,
            k=top_n or len(converted.candidates), now=self.now, track=self.track)
        docs = self._documents(documents, converted, ranking)
        if self._announce(callbacks):
            await adispatch_custom_event(RANKING_EVENT, self._payload(docs, ranking),
                                         config={"callbacks": callbacks})
        return docs


class HeapRankReranker(HeapRankOptions, BaseDocumentCompressor):
    """Re-rank documents by relevance x recency x importance x learned usefulness x rules.

    Returns new ``Document`` objects (ids kept, the caller's untouched), best first, with
    ``relevance_score`` (in [0, 1], 1.0 for the best), ``heaprank_score`` (the raw product),
    ``retrieval_score`` (the upstream relevance used), the rank, EXPLAIN line, heaprank id and
    recall id in metadata. Feed back what the answer used with
    :class:`~langchain_heaprank.HeapRankFeedbackHandler`, or with
    ``reranker.engine.feedback(recall_id, used=[ids])``.

    Example:
        >>> rr = HeapRankReranker(state="sqlite:///heaprank.db", top_n=3)
        >>> docs = rr.compress_documents(retriever.invoke(q), q)  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    top_n: int | None = 3
    """How many documents to return; ``None`` keeps them all."""

    @field_validator("top_n", mode="after")
    @classmethod
    def _check_top_n(cls, top_n: int | None) -> int | None:
        if top_n is not None and top_n < 1:
            raise ValueError(f"top_n: must be >= 1 or None, got {top_n}")
        return top_n

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        """Re-rank ``documents`` for ``query`` and keep the top :attr:`top_n`."""
        return self.rank_documents(documents, query, callbacks=callbacks, top_n=self.top_n)

    async def acompress_documents(self, documents: Sequence[Document], query: str,
                                  callbacks: Callbacks | None = None) -> Sequence[Document]:
        """Async :meth:`compress_documents`, native (the core's ``arerank``, no thread hop)."""
        return await self.arank_documents(documents, query, callbacks=callbacks, top_n=self.top_n)
