"""Nodes in, heaprank candidates out: stable ids from the source document, lenient or strict."""

from __future__ import annotations

import hashlib
import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from heaprank import InputError
from llama_index.core.schema import MetadataMode, NodeWithScore

logger = logging.getLogger("llama_index.postprocessor.heaprank")

#: heaprank candidate field -> node metadata key, by default (``__last_accessed__`` is the key
#: LlamaIndex's TimeWeightedPostprocessor writes).
DEFAULT_METADATA_KEYS: Mapping[str, str | None] = {
    "created_at": "created_at",
    "last_used": "__last_accessed__",
    "importance": "importance",
    "kind": "kind",
    "source": "source",
    "key": "key",
}
#: Where heaprank writes its raw product score; a node carrying it was ranked by heaprank, so its
#: ``NodeWithScore.score`` is heaprank's, and its upstream relevance is under ``retrieval_score``.
RAW_SCORE_KEY = "heaprank_score"
#: Where the node's score before heaprank is kept (``SentenceTransformerRerank``'s key too).
RETRIEVAL_SCORE_KEY = "retrieval_score"


def stable_id(nws: NodeWithScore, id_key: str | None) -> str:
    """``metadata[id_key]``; else ``ref_doc_id`` + content hash; else the content hash.

    ``node_id`` is a fresh uuid on every re-ingest, so learned usefulness cannot hang on it.
    """
    node = nws.node
    if id_key is not None:
        value = node.metadata.get(id_key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    digest = hashlib.sha256(node.get_content(MetadataMode.NONE).encode("utf-8")).hexdigest()[:16]
    return f"{node.ref_doc_id}#{digest}" if node.ref_doc_id else digest


def finite(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        return None
    return float(value)


def upstream_score(nws: NodeWithScore) -> Any:
    """The relevance ``nws`` came with: its score, unless heaprank gave it (then the
    ``retrieval_score`` heaprank kept)."""
    meta = nws.node.metadata
    return meta.get(RETRIEVAL_SCORE_KEY) if RAW_SCORE_KEY in meta else nws.score


@dataclass
class Converted:
    candidates: list[dict[str, Any]] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    upstream: list[float | None] = field(default_factory=list)
    flags: dict[str, list[str]] = field(default_factory=dict)


def _scores(nws: NodeWithScore, score: float | None) -> dict[str, float]:
    """The named scores of ``metadata.retriever_scores``: ``node`` (the score it came with) and
    ``retrieval`` (a ``retrieval_score`` an earlier step kept, when it differs)."""
    named = {} if score is None else {"node": score}
    kept = finite(nws.node.metadata.get(RETRIEVAL_SCORE_KEY))
    if kept is not None and RAW_SCORE_KEY not in nws.node.metadata:
        named["retrieval"] = kept
    return named


def to_candidates(nodes: Sequence[NodeWithScore], *, metadata_keys: Mapping[str, str],
                  id_key: str | None, strict: bool) -> Converted:
    """Convert ``nodes`` for :meth:`heaprank.Reranker.rerank`: relevance from the score each
    came with (:func:`upstream_score`), else the order; every score also goes to
    ``metadata.retriever_scores`` for ``Config(scoring=Scoring(fusion_weights=...))``. The core checks the
    metadata values (flagged in EXPLAIN, or raised with ``strict``); a duplicate id is dropped
    (strict: raised) here."""
    out = Converted()
    seen: set[str] = set()
    for i, nws in enumerate(nodes):
        where = f"nodes[{i}]"
        doc_id = stable_id(nws, id_key)
        if doc_id in seen:
            if strict:
                raise InputError(f"{where}: duplicate id {doc_id!r}")
            logger.warning("heaprank: dropped %s, a duplicate of id %r", where, doc_id)
            continue
        seen.add(doc_id)
        meta: dict[str, Any] = {name: nws.node.metadata[key] for name, key in metadata_keys.items()
                                if key in nws.node.metadata}
        given = upstream_score(nws)
        score = finite(given)
        if given is not None and score is None:
            if strict:
                raise InputError(f"{where}.score: expected a finite number, got {given!r}")
            out.flags.setdefault(doc_id, []).append("score not a finite number, ignored")
        named = _scores(nws, score)
        if named:
            meta["retriever_scores"] = named
        out.candidates.append({"id": doc_id, "text": nws.node.get_content(MetadataMode.NONE),
                               "metadata": meta})
        out.positions.append(i)
        out.upstream.append(score)
    given_all = [s is not None for s in out.upstream]
    if all(given_all):
        for cand, score in zip(out.candidates, out.upstream):
            cand["score"] = score
    elif any(given_all):  # the core takes a score on every candidate or on none
        if strict:
            raise InputError("nodes: some carry a score and others none")
        for cand in out.candidates:
            out.flags.setdefault(cand["id"], []).append("scores missing on some nodes: ranked by order")
    return out
