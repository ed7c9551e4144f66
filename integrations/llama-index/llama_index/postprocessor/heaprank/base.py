"""``HeapRankPostprocessor``: a LlamaIndex node postprocessor that re-ranks with heaprank."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
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
from llama_index.core.bridge.pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.dispatcher import active_instrument_tags
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import InstanceOf
from pydantic.json_schema import SkipJsonSchema

from ._convert import (
    DEFAULT_METADATA_KEYS,
    RAW_SCORE_KEY,
    RETRIEVAL_SCORE_KEY,
    Converted,
    logger,
    to_candidates,
)

dispatcher = get_dispatcher(__name__)

#: Instrumentation tag that sets the namespace for the calls inside ``instrument_tags({...})``.
NAMESPACE_TAG = "heaprank_namespace"
#: The ``namespace=`` of the ``postprocess_nodes`` call in progress (None: not given).
_CALL_NAMESPACE: ContextVar[str | None] = ContextVar("heaprank_call_namespace", default=None)
#: Metadata keys this postprocessor writes, hidden from the LLM prompt and the embedding text.
RANK_KEY, EXPLAIN_KEY, ID_KEY, RECALL_ID_KEY, STATE_KEY, NAMESPACE_KEY = (
    "heaprank_rank", "heaprank_explain", "heaprank_id", "heaprank_recall_id", "heaprank_state",
    "heaprank_namespace")
#: The one key shown to the LLM, with ``citations=True``: ``[n]``, the node's position.
CITATION_KEY = "citation"
#: Keywords of older versions or other postprocessors, and what to pass instead.
RENAMED = {
    "state_url": "pass state='sqlite:///path.db' (or a heaprank.Reranker)",
    "reranker": "pass state=Reranker(...)",
    "top_k": "pass top_n=",
    "keep_retrieval_score": "the score a node came with is always kept in metadata['retrieval_score']",
}


class HeapRankPostprocessor(BaseNodePostprocessor):
    """Re-rank nodes by relevance x recency x importance x learned usefulness x rules.

    ``NodeWithScore.score`` is a relevance in [0, 1], non-increasing with rank: 1.0 for the best
    node, ``s / s_best`` for the others (so ``SimilarityPostprocessor(similarity_cutoff=0.7)``
    keeps what is within 70% of heaprank's best). Metadata gets the raw product
    (``heaprank_score``), the score the node came with (``retrieval_score``, which a later
    heaprank reads as its relevance), the rank, EXPLAIN, the heaprank id, the recall id and the
    namespace, all hidden from the LLM prompt and the embedding text. ``citations=True`` adds a visible
    ``citation: [n]`` line for prompts that ask the model to cite (see :func:`citation_qa_template`).

    Example:
        >>> pp = HeapRankPostprocessor(state="sqlite:///heaprank.db", top_n=3)
        >>> engine = index.as_query_engine(similarity_top_k=20, node_postprocessors=[pp])  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    state: str | SkipJsonSchema[InstanceOf[Reranker]] | None = None
    """Learned state: a URL (``sqlite:///path.db``, ``redis://host:6379/0``, ``memory://``) or a
    :class:`heaprank.Reranker`. ``None``: ``$HEAPRANK_STATE``, else ``sqlite:///heaprank.db``
    in the working directory (what the ``heaprank`` command reads by default). After
    construction it holds the state's URL, which pickling and ``to_dict()`` carry."""
    config: SkipJsonSchema[InstanceOf[Config] | None] = Field(default=None, exclude=True)
    """heaprank settings (``Config(scoring=Scoring(fusion_weights={"node": 1.0}))``) with a state URL."""
    top_n: int | None = 3
    """How many nodes to return; ``None`` keeps them all."""
    namespace: str = "default"
    """Whose learned links to use; for one call, ``postprocess_nodes(..., namespace=...)`` or,
    around a query or chat engine's call, the instrument tag ``heaprank_namespace``."""
    strict: bool = False
    """Raise on bad metadata instead of neutralising the signal (flagged in EXPLAIN and logged)."""
    metadata_keys: dict[str, str | None] = Field(default_factory=lambda: {**DEFAULT_METADATA_KEYS})
    """heaprank field -> node metadata key (merged over the defaults; ``None`` ignores it)."""
    id_key: str | None = None
    """Metadata key of your own stable id; else ``ref_doc_id`` + a content hash."""
    citations: bool = False
    """Show the LLM a ``citation: [n]`` line per node (the default prompts show no ids)."""
    now: Any = None
    """Fixed current time (epoch, datetime or ISO) for tests and replays; the wall clock if None."""
    track: bool = True
    """Record the impression so feedback can follow."""

    _bound: BoundState | None = PrivateAttr(default=None)
    _loops: LoopClients | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "HeapRankPostprocessor"

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            reject_renamed(cls.__name__, data, RENAMED)
        return data

    @field_validator("metadata_keys", mode="after")
    @classmethod
    def _merge_keys(cls, keys: dict[str, str | None]) -> dict[str, str | None]:
        return check_metadata_keys(keys, DEFAULT_METADATA_KEYS)

    @field_validator("top_n", mode="after")
    @classmethod
    def _check_top_n(cls, top_n: int | None) -> int | None:
        if top_n is not None and top_n < 1:
            raise ValueError(f"top_n: must be >= 1 or None, got {top_n}")
        return top_n

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self._bound = BoundState.open(self.state, owner="HeapRankPostprocessor.state",
                                      config=self.config)
        self.state = self._bound.url  # from here on, the URL the state reopens from
        self._loops = LoopClients(self._bound.engine)
        self._check_handlers()

    def _check_handlers(self) -> None:
        """Warn when feedback handlers are installed and none of them holds this state."""
        keys = [h.heaprank_state_key for h in get_dispatcher().span_handlers
                if hasattr(h, "heaprank_state_key")]
        if keys and all(surely_different(self.state_key, k) for k in keys):
            message = (f"HeapRankPostprocessor: every installed HeapRankFeedbackHandler holds "
                       f"another state than this postprocessor ({self.state!r}): its feedback "
                       "cannot be recorded; build the handler with HeapRankFeedbackHandler(pp)")
            logger.warning("heaprank: %s", message)
            warn_at_caller(message, StateMismatchWarning)

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

    def __getstate__(self) -> dict[str, Any]:
        # The engine holds connections and locks: a pickle carries its URL and settings.
        spec = EngineSpec.of(self.engine, owner="pickling HeapRankPostprocessor")
        private = self.__pydantic_private__ or {}
        kept = dict(private)
        private["_bound"] = spec  # what BaseComponent then finds picklable
        private["_loops"] = None  # made anew with the engine it reopens
        try:
            return super().__getstate__()
        finally:
            private.update(kept)

    def __setstate__(self, state: dict[str, Any]) -> None:
        spec = (state.get("__pydantic_private__") or {}).get("_bound")
        if not isinstance(spec, EngineSpec):
            super().__setstate__(state)
            return
        fields = {k: v for k, v in state["__dict__"].items()
                  if k in type(self).model_fields and k not in ("state", "config")}
        self.__init__(state=spec.open(), **fields)  # type: ignore[misc]
        self.state = state["__dict__"]["state"]

    def _namespace(self) -> str:
        given = _CALL_NAMESPACE.get()
        if given is not None:
            return given
        tagged = active_instrument_tags.get().get(NAMESPACE_TAG)
        return str(tagged) if tagged is not None else self.namespace

    def postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None,
                          query_str: str | None = None, *,
                          namespace: str | None = None) -> list[NodeWithScore]:
        """Re-rank ``nodes``; ``namespace``: this call's (one postprocessor serves many users),
        else the instrument tag ``heaprank_namespace``, else :attr:`namespace`.

        Raises:
            InputTypeError, InputError: ``namespace`` is not a namespace (not a string, empty, ...).
        """
        token = _CALL_NAMESPACE.set(None if namespace is None else call_namespace(namespace, ""))
        try:
            return super().postprocess_nodes(nodes, query_bundle, query_str)
        finally:
            _CALL_NAMESPACE.reset(token)

    async def apostprocess_nodes(self, nodes: list[NodeWithScore],
                                 query_bundle: QueryBundle | None = None,
                                 query_str: str | None = None, *,
                                 namespace: str | None = None) -> list[NodeWithScore]:
        """Async :meth:`postprocess_nodes`."""
        token = _CALL_NAMESPACE.set(None if namespace is None else call_namespace(namespace, ""))
        try:
            return await super().apostprocess_nodes(nodes, query_bundle, query_str)
        finally:
            _CALL_NAMESPACE.reset(token)

    @contextmanager
    def _reranking(self, nodes: list[NodeWithScore],
                   query_bundle: QueryBundle | None) -> Iterator[_Call]:
        """One rerank with its events: the caller sets ``call.ranking`` (sync or async)."""
        if query_bundle is None:
            raise ValueError("query_bundle: required (pass query_str= or query_bundle=)")
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes,
                                          top_n=self.top_n or len(nodes), model_name="heaprank"))
        keys = {name: key for name, key in self.metadata_keys.items() if key is not None}
        converted = to_candidates(nodes, metadata_keys=keys, id_key=self.id_key, strict=self.strict)
        assert self._bound is not None
        call = _Call(self._bound.ranking(self.strict), query_bundle.query_str, converted.candidates,
                     {"namespace": self._namespace(), "now": self.now, "track": self.track,
                      "k": self.top_n or len(converted.candidates)})
        with self.callback_manager.event(CBEventType.RERANKING, payload={
                EventPayload.NODES: nodes, EventPayload.MODEL_NAME: "heaprank",
                EventPayload.QUERY_STR: query_bundle.query_str,
                EventPayload.TOP_K: self.top_n}) as event:
            yield call
            assert call.ranking is not None
            call.out = self._nodes(nodes, converted, call.ranking)
            event.on_end(payload={EventPayload.NODES: call.out})
        dispatcher.event(ReRankEndEvent(nodes=call.out))

    def _nodes(self, nodes: list[NodeWithScore], converted: Converted,
               ranking: Ranking) -> list[NodeWithScore]:
        where = {c["id"]: i for i, c in enumerate(converted.candidates)}
        hidden = [RAW_SCORE_KEY, RETRIEVAL_SCORE_KEY, RANK_KEY, EXPLAIN_KEY, ID_KEY, RECALL_ID_KEY,
                  STATE_KEY, NAMESPACE_KEY]
        out = []
        for item, relevance, explain in zip(ranking, relative_scores([r.score for r in ranking]),
                                            explained(ranking, converted.flags, logger)):
            i = where[item.id]
            source = nodes[converted.positions[i]]
            node = source.node.model_copy()  # the docstore's node stays as it was
            node.metadata = {**source.node.metadata, RAW_SCORE_KEY: item.score, RANK_KEY: item.rank,
                             EXPLAIN_KEY: explain,
                             ID_KEY: item.id, RECALL_ID_KEY: ranking.recall_id,
                             STATE_KEY: self.state_key, NAMESPACE_KEY: ranking.namespace}
            if converted.upstream[i] is not None:
                node.metadata[RETRIEVAL_SCORE_KEY] = converted.upstream[i]
            if self.citations:
                node.metadata[CITATION_KEY] = f"[{item.rank}]"
            node.excluded_llm_metadata_keys = _union(node.excluded_llm_metadata_keys, hidden)
            node.excluded_embed_metadata_keys = _union(node.excluded_embed_metadata_keys,
                                                       [*hidden, CITATION_KEY])
            out.append(NodeWithScore(node=node, score=relevance))
        return out

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if not nodes:
            return []
        with self._reranking(nodes, query_bundle) as call:
            call.ranking = call.engine.rerank(call.query, call.candidates, **call.options)
        return call.out

    @dispatcher.span
    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        """Native async on the core's ``arerank`` (a Redis state's round trips are awaited on
        the event loop, no thread hop)."""
        if not nodes:
            return []
        assert self._loops is not None
        await self._loops.enter()
        with self._reranking(nodes, query_bundle) as call:
            call.ranking = await call.engine.arerank(call.query, call.candidates, **call.options)
        return call.out


@dataclass
class _Call:
    """One rerank's arguments, and what it gave."""

    engine: Reranker
    query: str
    candidates: list[dict[str, Any]]
    options: dict[str, Any]
    ranking: Ranking | None = None
    out: list[NodeWithScore] = field(default_factory=list)


def _union(existing: list[str], added: list[str]) -> list[str]:
    return [*existing, *(k for k in added if k not in existing)]
