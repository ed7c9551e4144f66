"""Documents in, heaprank candidates out: stable ids, mapped metadata, every score they carry."""

from __future__ import annotations

import hashlib
import logging
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from heaprank import InputError
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
#: Where heaprank writes its raw product score; a document carrying it was ranked by heaprank,
#: so its ``relevance_score`` is heaprank's, never read back as an upstream relevance.
RAW_SCORE_KEY = "heaprank_score"
#: Where the upstream relevance heaprank used is kept (and read from by a later heaprank).
RETRIEVAL_SCORE_KEY = "retrieval_score"
#: ``metadata.retriever_scores`` name of an upstream reranker's relevance (Cohere, FlashRank).
UPSTREAM_SCORE = "upstream"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: A canonical UUID: what vector stores (FAISS, InMemoryVectorStore, Chroma) give a document
#: that came without an id, anew on every build.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def stable_id(doc: Document) -> str:
    """``doc.id`` unless it is a UUID; else ``metadata["id"|"doc_id"]``; else
    ``metadata["source"]`` + content hash; else the content hash.

    Learned usefulness, use counts and recency hang on this id, so it must survive re-indexing
    the same text: a UUID ``doc.id`` is taken for a store's random one (FAISS makes new ones on
    every rebuild) and the document keeps it only as a name the answer may cite it by. An id
    of your own that is a UUID goes in ``metadata["id"]``.
    """
    if doc.id and not _UUID.fullmatch(str(doc.id)):
        return str(doc.id)
    for key in ("id", "doc_id", "source"):
        value = doc.metadata.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            if key == "source":  # one source file holds many chunks
                return f"{value}#{content_hash(doc.page_content)}"
            return str(value)
    return content_hash(doc.page_content)


def finite(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number (numpy scalars too: FAISS gives
    float32), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        return None
    return float(value)


@dataclass
class Converted:
    """The candidates for the core, and per candidate what the adapter set aside."""

    candidates: list[dict[str, Any]] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # index of each candidate in the input
    upstream: list[float | None] = field(default_factory=list)  # the relevance each one came with
    flags: dict[str, list[str]] = field(default_factory=dict)


def upstream_score(doc: Document, relevance_key: str | None) -> Any:
    """The relevance ``doc`` came with: ``retrieval_score`` (kept by heaprank or another
    step), else ``metadata[relevance_key]`` unless heaprank itself wrote that key."""
    meta = doc.metadata
    if RETRIEVAL_SCORE_KEY in meta:
        return meta[RETRIEVAL_SCORE_KEY]
    if relevance_key is None or RAW_SCORE_KEY in meta:
        return None
    return meta.get(relevance_key)


def to_candidates(docs: Sequence[Document], scores: Sequence[float] | None,
                  extra: Sequence[Mapping[str, float]] | None, *, metadata_keys: Mapping[str, str],
                  relevance_key: str | None, strict: bool) -> Converted:
    """Convert ``docs`` for :meth:`heaprank.Reranker.rerank`.

    Relevance comes from ``scores`` (a retriever's, one per document), else from the score the
    document carries (:func:`upstream_score`), else from the order. ``extra`` (named scores per
    document, e.g. ``{"bm25": 7.1}``) and the upstream score go to ``metadata.retriever_scores``
    for ``Config(scoring=Scoring(fusion_weights=...))``. The core checks the metadata values
    (flagged in EXPLAIN, or raised with ``strict``); a duplicate id is dropped (strict: raised)
    here.
    """
    out = Converted()
    seen: set[str] = set()
    for i, doc in enumerate(docs):
        doc_id = stable_id(doc)
        if doc_id in seen:
            if strict:
                raise InputError(f"documents[{i}].id: duplicate id {doc_id!r}")
            logger.warning("heaprank: dropped documents[%d], a duplicate of id %r", i, doc_id)
            continue
        seen.add(doc_id)
        meta = {name: doc.metadata[key] for name, key in metadata_keys.items() if key in doc.metadata}
        named = {name: s for name, s in (extra[i] if extra is not None else {}).items()
                 if finite(s) is not None}
        given = scores[i] if scores is not None else upstream_score(doc, relevance_key)
        score = finite(given)
        if given is not None and score is None:
            if strict:
                raise InputError(f"documents[{i}] (id {doc_id!r}): score {given!r} is not a "
                                 "finite number")
            out.flags.setdefault(doc_id, []).append("score not a finite number, ignored")
        if scores is None and score is not None:
            named[UPSTREAM_SCORE] = score
        if named:
            meta["retriever_scores"] = named
        out.candidates.append({"id": doc_id, "text": doc.page_content, "metadata": meta})
        out.positions.append(i)
        out.upstream.append(score)
    _set_scores(out, strict)
    return out


def _set_scores(out: Converted, strict: bool) -> None:
    # The core takes a score on every candidate or on none: rank by the order otherwise.
    given = [s is not None for s in out.upstream]
    if all(given):
        for cand, score in zip(out.candidates, out.upstream):
            cand["score"] = score
    elif any(given):
        if strict:
            raise InputError("documents: some carry a score and others none")
        for cand in out.candidates:
            out.flags.setdefault(cand["id"], []).append("scores missing on some: ranked by order")
