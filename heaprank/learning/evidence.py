"""What the state knows of one rerank's candidates: the links of their distinct feature rows,
their documents' use, the co-use edges among them. Read in one request, kept while the state's
version stands, and replaced by the priors when the state cannot be reached.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .._flow import Flow
from ..errors import (
    StateCorruptError,
    StateError,
    StateFullError,
    StateReadOnlyError,
    StateUnavailableError,
)
from ..records import DocStats, LinkCounts
from ..scoring.space import FeatureSpace
from ..state.capabilities import VersionedState
from ..state.edges import EdgeRows
from ..state.requests import Read, ReadDocs, ReadWithEdges, StateRequest
from . import links as linkmath

logger = logging.getLogger("heaprank")

#: Distinct-row sets whose links a reranker keeps between feedbacks (see :meth:`Evidence.read`).
ROW_CACHE_ENTRIES = 1_024
#: How many of a row's strongest links a result shows.
TOP_LINKS = 3


def cause(exc: StateError) -> str:
    """What went wrong with the state, as an EXPLAIN flag says it."""
    for kind, words in ((StateUnavailableError, "unavailable"), (StateFullError, "full"),
                        (StateReadOnlyError, "read-only"), (StateCorruptError, "corrupt")):
        if isinstance(exc, kind):
            return f"state {words}"
    return "state failed"


class RowLinks(NamedTuple):
    """What a rerank derives from the links of its distinct feature rows (one row per row)."""

    matrix: np.ndarray  # feature ids
    where: np.ndarray  # each entry's position in alpha and beta
    alpha: np.ndarray  # posterior of each distinct feature
    beta: np.ndarray
    p: np.ndarray  # posterior mean of each entry
    usefulness: np.ndarray  # noisy-OR of each row
    top_links: dict[int, tuple[tuple[str, float], ...]]  # a row's strongest links, once worked out
    link_texts: dict[int, str]  # a row's top links as EXPLAIN shows them, once composed


class Evidence(NamedTuple):
    """What one rerank read: the links of its rows, its documents' stats, the co-use edges
    among its candidates (None: not asked for, or unreadable), and the EXPLAIN flags of an
    outage (then the links are the priors and the rerank is not tracked)."""

    links: RowLinks
    docs: DocStats
    edges: EdgeRows | None
    flags: tuple[str, ...]


def _no_state(n_features: int, n_docs: int) -> tuple[LinkCounts, DocStats]:
    """What a rerank reads when the state cannot be reached: no evidence, no use."""
    zero = np.zeros(n_features)
    return (LinkCounts(zero, zero, zero, zero),
            DocStats(np.full(n_docs, math.nan), np.zeros(n_docs)))


class EvidenceReader:
    """Reads what the state knows of a rerank's candidates, keeping the links of each set of
    feature rows while a versioned state's version stands (reranks between two feedbacks then
    read the documents, and edges, only).

    A change between the version read and the counts read stores links newer than their
    version: the next rerank sees a newer version and reads again, so what is kept is never
    stale.
    """

    def __init__(self, space: FeatureSpace, prior: linkmath.Prior, *,
                 versioned: VersionedState | None, strict: bool) -> None:
        self._space = space
        self._prior = prior
        self._versioned = versioned
        self._strict = strict
        # (namespace, feature-space generation, distinct rows) -> (state version, links)
        self._kept: dict[tuple[str, int, bytes], tuple[object, RowLinks]] = {}

    def version(self) -> object:
        """The state's version now (None: it has none, or it cannot be read)."""
        if self._versioned is None:
            return None
        try:
            return self._versioned.version
        except StateError:
            return None  # the read reports it

    def clear(self) -> None:
        self._kept.clear()

    def read(self, namespace: str, rows: np.ndarray, ids: Sequence[str], *, edges: bool,
             version: object) -> Flow[StateRequest, Evidence]:
        """The evidence on the distinct feature rows ``rows`` and the documents ``ids``, with
        the edges among them when ``edges``. ``version``: the state's version read before this
        flow's requests (None: none, or the requests go to an async twin)."""
        key = (namespace, self._space.generation, rows.tobytes())
        hit = self._kept.get(key) if version is not None else None
        kept = hit[1] if hit is not None and hit[0] == version else None
        matrix = self._space.matrix(rows) if kept is None else kept.matrix
        names: list[str] = []
        if kept is None:
            vocab, where = np.unique(matrix, return_inverse=True)
            names = list(map(self._space.names.__getitem__, vocab.tolist()))
        flags: tuple[str, ...] = ()
        edge_rows: EdgeRows | None = None
        try:
            if edges:  # no edges fetched unless they count
                counts, docs, edge_rows = yield ReadWithEdges(namespace, names, ids)
            elif kept is not None:  # a state with a version reads its documents alone
                docs = yield ReadDocs(namespace, ids)
            else:
                counts, docs = yield Read(namespace, names, ids)
        except StateError as exc:  # any failure of the state: rank on the priors
            if self._strict:
                raise
            logger.warning("heaprank: %s, ranking on the retriever and the priors: %s",
                           cause(exc), exc)
            if kept is not None:  # rank on the priors, not on what was kept
                kept = None
                vocab, where = np.unique(matrix, return_inverse=True)
            counts, docs = _no_state(len(vocab), len(ids))
            flags = (f"{cause(exc)}: priors only, not tracked",)
        if kept is not None:
            return Evidence(kept, docs, edge_rows, flags)
        links = self._links(counts, matrix, where)
        if version is not None and not flags:
            if len(self._kept) >= ROW_CACHE_ENTRIES:
                self._kept.clear()
            self._kept[key] = (version, links)
        return Evidence(links, docs, edge_rows, flags)

    def _links(self, counts: LinkCounts, matrix: np.ndarray, where: np.ndarray) -> RowLinks:
        alpha, beta = linkmath.posterior(counts, self._prior)
        shaped = where.reshape(matrix.shape)
        row_p = linkmath.posterior_mean(alpha, beta)[shaped]
        return RowLinks(matrix, shaped, alpha, beta, row_p, linkmath.noisy_or(row_p), {}, {})

    def top_links(self, links: RowLinks,
                  rows: list[int]) -> dict[int, tuple[tuple[str, float], ...]]:
        """The :data:`TOP_LINKS` strongest links ``(feature, p)`` of these rows, strongest first
        (ties in the row's order), worked out for the rows not seen yet and kept with
        ``links`` (while they are kept, a row's top links are too)."""
        known = links.top_links
        if known.keys() >= set(rows):  # the usual case, while the links are kept
            return known
        missing = [r for r in dict.fromkeys(rows) if r not in known]
        if missing:
            names, at = self._space.names, np.array(missing)
            p, matrix = links.p[at], links.matrix[at]
            best = np.argsort(-p, axis=1, kind="stable")[:, :TOP_LINKS]
            which = np.arange(len(missing))[:, None]
            for r, ids, ps in zip(missing, matrix[which, best].tolist(), p[which, best].tolist()):
                known[r] = tuple(zip([names[f] for f in ids], ps))
        return known
