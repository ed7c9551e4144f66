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
from heaprank.scoring.candidates import DEFAULT_FIELD_KEYS
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
#: Candidate fields whose value must be a string (an int is read as its decimal string).
LABEL_FIELDS = frozenset({"kind", "source", "key", "thread"})
#: Every candidate field heaprank reads: the core's own list, never a copy of it.
KNOWN_FIELDS = frozenset(DEFAULT_FIELD_KEYS)


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


@dataclass
class Converted:
    candidates: list[dict[str, Any]] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    flags: dict[str, list[str]] = field(default_factory=dict)


def to_candidates(nodes: Sequence[NodeWithScore], *, metadata_keys: Mapping[str, str],
                  id_key: str | None, strict: bool) -> Converted:
    """Convert ``nodes`` for :meth:`heaprank.Reranker.rerank` (relevance from ``NodeWithScore.score``,
    else the order). Lenient mode drops and flags a value of the wrong type; strict mode raises
    :class:`heaprank.InputError` naming the node and the metadata key."""
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
        flags: list[str] = []
        meta: dict[str, Any] = {}
        for name, key in metadata_keys.items():
            value = nws.node.metadata.get(key)
            if value is None:
                continue
            if name in LABEL_FIELDS and not isinstance(value, str):
                if isinstance(value, int) and not isinstance(value, bool):
                    value = str(value)
                else:
                    if strict:
                        raise InputError(f"{where}.metadata[{key!r}]: expected a string, "
                                         f"got {type(value).__name__}")
                    flags.append(f"{key} not a string ({type(value).__name__}), ignored")
                    continue
            meta[name] = value
        cand: dict[str, Any] = {"id": doc_id, "text": nws.node.get_content(MetadataMode.NONE),
                                "metadata": meta}
        score = nws.score
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
                if strict:
                    raise InputError(f"{where}.score: expected a finite number, got {score!r}")
                flags.append("score not a finite number, ignored")
            else:
                cand["score"] = float(score)
        out.candidates.append(cand)
        out.positions.append(i)
        if flags:
            out.flags[doc_id] = flags
    scored = ["score" in c for c in out.candidates]
    if any(scored) and not all(scored):
        # The core needs every score or none: rank by the retriever's order instead.
        if strict:
            raise InputError("nodes: some carry a score and others none")
        for cand in out.candidates:
            cand.pop("score", None)
            out.flags.setdefault(cand["id"], []).append("scores missing on some nodes: ranked by order")
    return out
