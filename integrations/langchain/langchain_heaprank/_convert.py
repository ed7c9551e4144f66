"""Documents in, heaprank candidates out: stable ids, mapped metadata, lenient or strict."""

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
from langchain_core.documents import Document

logger = logging.getLogger("langchain_heaprank")

#: heaprank candidate field -> the Document metadata key it is read from, by default.
DEFAULT_METADATA_KEYS: Mapping[str, str | None] = {
    "created_at": "created_at",
    "last_used": "last_accessed_at",
    "importance": "importance",
    "kind": "kind",
    "source": "source",
    "key": "key",
}

#: Candidate fields whose value must be a string (an int is read as its decimal string).
LABEL_FIELDS = frozenset({"kind", "source", "key", "thread"})
#: Every candidate field heaprank reads: the core's own list, never a copy of it.
KNOWN_FIELDS = frozenset(DEFAULT_FIELD_KEYS)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def stable_id(doc: Document) -> str:
    """``doc.id``; else ``metadata["id"|"doc_id"|"source"]`` + content hash; else the content hash.

    Learned usefulness hangs on this id, so it must survive re-indexing the same text.
    """
    if doc.id:
        return str(doc.id)
    for key in ("id", "doc_id", "source"):
        value = doc.metadata.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            if key == "source":  # one source file holds many chunks
                return f"{value}#{content_hash(doc.page_content)}"
            return str(value)
    return content_hash(doc.page_content)


@dataclass
class Converted:
    """The candidates for the core, and per candidate what the adapter neutralised."""

    candidates: list[dict[str, Any]] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # index of each candidate in the input
    flags: dict[str, list[str]] = field(default_factory=dict)


def _fail(strict: bool, where: str, message: str) -> None:
    if strict:
        raise InputError(f"{where}: {message}")


def _score(value: Any, where: str, strict: bool) -> float | None:
    if value is None:
        return None
    # numbers.Real takes numpy scalars too (FAISS returns float32 scores).
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        _fail(strict, where, f"expected a finite number, got {value!r}")
        return None
    return float(value)


def to_candidates(docs: Sequence[Document], scores: Sequence[float | None] | None, *,
                  metadata_keys: Mapping[str, str], score_key: str | None,
                  strict: bool) -> Converted:
    """Convert ``docs`` for :meth:`heaprank.Reranker.rerank`.

    Relevance comes from ``scores`` (a vector store's), else ``metadata[score_key]``, else the
    order. In lenient mode a value of the wrong type is dropped and flagged (the core flags the
    values it checks itself: unparsable times, negative importance, NaN); in strict mode it
    raises :class:`heaprank.InputError` naming the document and the metadata key.
    """
    out = Converted()
    seen: set[str] = set()
    raw_scores: list[float | None] = []
    for i, doc in enumerate(docs):
        doc_id = stable_id(doc)
        if doc_id in seen:
            _fail(strict, f"documents[{i}].id", f"duplicate id {doc_id!r}")
            logger.warning("heaprank: dropped documents[%d], a duplicate of id %r", i, doc_id)
            continue
        seen.add(doc_id)
        flags: list[str] = []
        meta: dict[str, Any] = {}
        for name, key in metadata_keys.items():
            value = doc.metadata.get(key)
            if value is None:
                continue
            if name in LABEL_FIELDS and not isinstance(value, str):
                if isinstance(value, int) and not isinstance(value, bool):
                    value = str(value)
                else:
                    _fail(strict, f"documents[{i}].metadata[{key!r}]",
                          f"expected a string, got {type(value).__name__}")
                    flags.append(f"{key} not a string ({type(value).__name__}), ignored")
                    continue
            meta[name] = value
        if scores is not None:
            raw = scores[i]
        else:
            raw = doc.metadata.get(score_key) if score_key else None
        score = _score(raw, f"documents[{i}].metadata[{score_key!r}]", strict)
        if raw is not None and score is None:
            flags.append(f"{score_key} not a finite number, ignored")
        raw_scores.append(score)
        out.candidates.append({"id": doc_id, "text": doc.page_content, "metadata": meta})
        out.positions.append(i)
        if flags:
            out.flags[doc_id] = flags
    given = [s is not None for s in raw_scores]
    if all(given):
        for cand, score in zip(out.candidates, raw_scores):
            cand["score"] = score
    elif any(given):
        # The core needs every score or none: rank by the retriever's order instead.
        _fail(strict, "documents", "some documents carry a score and others none")
        for cand in out.candidates:
            if out.flags.get(cand["id"]) is None:
                out.flags[cand["id"]] = []
            out.flags[cand["id"]].append("scores missing on some documents: ranked by order")
    return out
