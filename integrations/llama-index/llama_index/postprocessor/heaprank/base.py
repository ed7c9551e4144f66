"""``HeapRankPostprocessor``: a LlamaIndex node postprocessor that re-ranks with heaprank."""

from __future__ import annotations

from typing import Any, Literal

from heaprank import Config, Ranking, Reranker
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.dispatcher import active_instrument_tags
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic.json_schema import SkipJsonSchema

from ._convert import DEFAULT_METADATA_KEYS, KNOWN_FIELDS, Converted, logger, to_candidates

dispatcher = get_dispatcher(__name__)

#: Instrumentation tag that sets the namespace for the calls inside ``instrument_tags({...})``.
NAMESPACE_TAG = "heaprank_namespace"
#: Metadata keys this postprocessor writes (hidden from the LLM prompt and the embedding text).
RANK_KEY, EXPLAIN_KEY, ID_KEY, RECALL_ID_KEY = ("heaprank_rank", "heaprank_explain", "heaprank_id",
                                                "heaprank_recall_id")
RETRIEVAL_SCORE_KEY = "retrieval_score"


class HeapRankPostprocessor(BaseNodePostprocessor):
    """Re-rank nodes by relevance x recency x importance x learned usefulness x rules.

    The final score goes in ``NodeWithScore.score``; rank, EXPLAIN, the heaprank id and the recall
    id go in metadata, excluded from the LLM prompt and the embedding text. Learned state lives at
    ``state_url`` (``"sqlite:///heaprank.db"`` persists; ``"memory://"`` does not), so a pickled
    or ``to_dict``-ed postprocessor reopens the same state.

    Example:
        >>> pp = HeapRankPostprocessor(state_url="sqlite:///heaprank.db", top_n=3)
        >>> engine = index.as_query_engine(similarity_top_k=20, node_postprocessors=[pp])  # doctest: +SKIP
    """

    state_url: str = "memory://"
    """Where learned state lives: ``memory://``, ``sqlite:///path.db`` or ``redis://...``."""
    top_n: int | None = 3
    """How many nodes to return; ``None`` keeps them all."""
    namespace: str = "default"
    """Whose learned links to use; the instrument tag ``heaprank_namespace`` overrides it."""
    strict: bool = False
    """Raise on bad metadata instead of neutralising the signal (flagged in EXPLAIN and logged)."""
    metadata_keys: dict[str, str | None] = Field(default_factory=lambda: {**DEFAULT_METADATA_KEYS})
    """heaprank field -> node metadata key (merged over the defaults; ``None`` ignores it)."""
    id_key: str | None = None
    """Metadata key of your own stable id; else ``ref_doc_id`` + a content hash."""
    keep_retrieval_score: bool = False
    """Keep the retriever's score in ``metadata["retrieval_score"]``."""
    now: Any = None
    """Fixed current time (epoch, datetime or ISO) for tests and replays; the wall clock if None."""
    track: bool = True
    """Record the impression so feedback can follow."""
    reranker: SkipJsonSchema[Reranker | None] = Field(default=None, exclude=True)
    """The engine; built from ``state_url`` when not given (a given one is not rebuilt on
    unpickle: ``state_url`` is)."""

    _rebuilt: bool = PrivateAttr(default=False)

    @classmethod
    def class_name(cls) -> str:
        return "HeapRankPostprocessor"

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

    def model_post_init(self, context: Any) -> None:
        wanted: Literal["raise", "neutral"] = "raise" if self.strict else "neutral"
        if self.reranker is None:
            self.reranker = Reranker(self.state_url, config=Config(on_invalid=wanted))
        elif self.reranker.config.on_invalid != wanted:
            self.reranker = self.reranker.with_config(on_invalid=wanted)

    def __getstate__(self) -> dict[str, Any]:
        # The engine holds open connections; unpickling re-runs __init__, which reopens state_url.
        engine = self.__dict__.pop("reranker")
        try:
            state = super().__getstate__()
            state["__dict__"] = dict(state["__dict__"])
        finally:
            self.__dict__["reranker"] = engine
        return state

    @property
    def engine(self) -> Reranker:
        assert self.reranker is not None  # set in model_post_init
        return self.reranker

    def _namespace(self) -> str:
        tagged = active_instrument_tags.get().get(NAMESPACE_TAG)
        return str(tagged) if tagged is not None else self.namespace

    def _rank(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("query_bundle: required (pass query_str= or query_bundle=)")
        if not nodes:
            return []
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n or len(nodes),
                                          model_name="heaprank"))
        with self.callback_manager.event(CBEventType.RERANKING, payload={
                EventPayload.NODES: nodes, EventPayload.MODEL_NAME: "heaprank",
                EventPayload.QUERY_STR: query_bundle.query_str,
                EventPayload.TOP_K: self.top_n}) as event:
            keys = {name: key for name, key in self.metadata_keys.items() if key is not None}
            converted = to_candidates(nodes, metadata_keys=keys, id_key=self.id_key, strict=self.strict)
            ranking = self.engine.rerank(query_bundle.query_str, converted.candidates,
                                         namespace=self._namespace(),
                                         k=self.top_n or len(converted.candidates), now=self.now,
                                         track=self.track)
            out = self._nodes(nodes, converted, ranking)
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    def _nodes(self, nodes: list[NodeWithScore], converted: Converted,
               ranking: Ranking) -> list[NodeWithScore]:
        position = {c["id"]: p for c, p in zip(converted.candidates, converted.positions)}
        written = [RANK_KEY, EXPLAIN_KEY, ID_KEY, RECALL_ID_KEY]
        if self.keep_retrieval_score:
            written.append(RETRIEVAL_SCORE_KEY)
        out = []
        for item in ranking:
            source = nodes[position[item.id]]
            explain = item.explain()
            extra = converted.flags.get(item.id)
            if extra:
                explain += (" ! " if " ! " not in explain else "; ") + "; ".join(extra)
            if item.flags or extra:
                logger.warning("heaprank: %s: %s", item.id, "; ".join([*item.flags, *(extra or [])]))
            node = source.node.model_copy()  # the docstore's node stays as it was
            node.metadata = {**source.node.metadata, RANK_KEY: item.rank, EXPLAIN_KEY: explain,
                             ID_KEY: item.id, RECALL_ID_KEY: ranking.recall_id}
            if self.keep_retrieval_score:
                node.metadata[RETRIEVAL_SCORE_KEY] = source.score
            node.excluded_llm_metadata_keys = _union(node.excluded_llm_metadata_keys, written)
            node.excluded_embed_metadata_keys = _union(node.excluded_embed_metadata_keys, written)
            out.append(NodeWithScore(node=node, score=item.score))
        return out

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        return self._rank(nodes, query_bundle)

    @dispatcher.span
    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        # Native: scoring is a millisecond of CPU work, cheaper inline than on a thread pool.
        return self._rank(nodes, query_bundle)


def _union(existing: list[str], added: list[str]) -> list[str]:
    return [*existing, *(k for k in added if k not in existing)]
