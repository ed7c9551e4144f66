"""What the state knows of one rerank's candidates: the links of their distinct feature rows,
their documents' use, the co-use edges among them. Read in one request, kept while the state's
version stands, and replaced by the priors when the state cannot be reached.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import (
    ConfigError,
    StateCorruptError,
    StateError,
    StateFullError,
    StateReadOnlyError,
    StateUnavailableError,
)
from ..model import links as linkmath
from ..model.evidence import DocStats, EdgeRows, Evidence, LinkCounts, RowLinks
from ..model.privacy import mask_pooled
from ..scoring.generation import Generation
from ..scoring.space import FeatureRows, FeatureSpace
from ..state.capabilities import (
    AsyncEdgeBackend,
    AsyncStateBackend,
    Capabilities,
    EdgeBackend,
    VersionedState,
)

logger = logging.getLogger("heaprank")

#: Distinct-row sets whose links a reranker keeps between feedbacks (see :meth:`Evidence.read`).
ROW_CACHE_ENTRIES = 1_024


def _drop_oldest(kept: dict[Any, Any]) -> None:
    """Drop the oldest entry of a cache other threads may change meanwhile: one entry per
    rerank once it is full, where clearing all of them at once made one rerank free a
    thousand entries' arrays (16 ms). Another thread's change mid-way drops nothing."""
    try:
        for key in kept:
            kept.pop(key, None)
            return
    except RuntimeError:  # the dict changed size under the iteration
        pass


#: How many of a row's strongest links a result shows.
TOP_LINKS = 3


def cause(exc: StateError) -> str:
    """What went wrong with the state, as an EXPLAIN flag says it."""
    for kind, words in ((StateUnavailableError, "unavailable"), (StateFullError, "full"),
                        (StateReadOnlyError, "read-only"), (StateCorruptError, "corrupt")):
        if isinstance(exc, kind):
            return f"state {words}"
    return "state failed"




class _Ask(NamedTuple):
    """What a rerank asks the state for: the links kept for its rows (None: read them, the
    features ``names``), under ``key`` while the state's ``version`` stands."""

    key: tuple[str, int, bytes]
    version: object
    kept: RowLinks | None
    matrix: np.ndarray
    names: list[str]
    where: np.ndarray | None  # each matrix entry's position among ``names``


def async_edge_store(twin: AsyncStateBackend) -> AsyncEdgeBackend:
    """The async twin as an edge store (a reranker with co-use uses only such a twin)."""
    if not isinstance(twin, AsyncEdgeBackend):
        raise ConfigError(f"co_use: the async state {type(twin).__name__} stores no co-use "
                          f"edges")
    return twin


def edge_store(caps: Capabilities) -> EdgeBackend:
    """The state as an edge store, or the ConfigError of a state without co-use edges."""
    if caps.edges is None:
        raise ConfigError(f"co_use: the state {type(caps.state).__name__} stores no co-use "
                          f"edges (it has no read_with_edges / edge_state / list_edges)")
    return caps.edges


class EvidenceReader:
    """Reads what the state knows of a rerank's candidates, keeping the links of each set of
    feature rows while a versioned state's version stands (reranks between two feedbacks then
    read the documents, and edges, only).

    A change between the version read and the counts read stores links newer than their
    version: the next rerank sees a newer version and reads again, so what is kept is never
    stale. The counts read are masked first (:func:`~heaprank.model.privacy.mask_pooled`, at
    ``min_namespaces``): a caller's value too few namespaces hold borrows nothing pooled.
    """

    def __init__(self, space: FeatureSpace, prior: linkmath.Prior, *,
                 versioned: VersionedState | None, strict: bool,
                 min_namespaces: int = 1) -> None:
        self._space = space
        self._prior = prior
        self._min_namespaces = min_namespaces
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

    def read(self, caps: Capabilities, namespace: str, rows: FeatureRows, ids: Sequence[str],
             *, edges: bool, version: object) -> Evidence:
        """The evidence on the distinct feature rows ``rows`` (of their generation) and the
        documents ``ids``, with the edges among them when ``edges``, read from the state.
        ``version``: the state's version read just before (None: it has none)."""
        ask = self._ask(namespace, rows, version)
        try:
            if edges:  # no edges fetched unless they count
                counts, docs, edge_rows = edge_store(caps).read_with_edges(namespace,
                                                                            ask.names, ids)
                if ask.kept is not None:
                    return Evidence(ask.kept, docs, edge_rows, ())
                return self._finish(ask, counts, docs, edge_rows)
            if ask.kept is not None and caps.versioned is not None:
                return Evidence(ask.kept, caps.versioned.read_docs(namespace, ids), None, ())
            counts, docs = caps.state.read(namespace, ask.names, ids)
        except StateError as exc:  # any failure of the state: rank on the priors
            return self._outage(ask, len(ids), exc)
        return self._finish(ask, counts, docs, None)

    async def aread(self, twin: AsyncStateBackend, namespace: str, rows: FeatureRows,
                    ids: Sequence[str], *, edges: bool) -> Evidence:
        """:meth:`read` on a state's async twin (nothing kept: its reads are not ordered after
        a read of the sync state's version)."""
        ask = self._ask(namespace, rows, None)
        edge_rows = None
        try:
            if edges:
                counts, docs, edge_rows = await async_edge_store(twin).read_with_edges(
                    namespace, ask.names, ids)
            else:
                counts, docs = await twin.read(namespace, ask.names, ids)
        except StateError as exc:
            return self._outage(ask, len(ids), exc)
        return self._finish(ask, counts, docs, edge_rows)

    def _ask(self, namespace: str, rows: FeatureRows, version: object) -> _Ask:
        gen = rows.generation  # its names, whatever reset another thread makes meanwhile
        key = (namespace, gen.number, rows.distinct.tobytes())
        hit = self._kept.get(key) if version is not None else None
        kept = hit[1] if hit is not None and hit[0] == version else None
        matrix = gen.matrix_of(rows.distinct) if kept is None else kept.matrix
        names: list[str] = []
        where = None
        if kept is None:
            vocab, where = np.unique(matrix, return_inverse=True)
            names = list(map(gen.names.__getitem__, vocab.tolist()))
        return _Ask(key, version, kept, matrix, names, where)

    def _outage(self, ask: _Ask, n_docs: int, exc: StateError) -> Evidence:
        """The evidence of a rerank whose state failed: the priors, flagged, not tracked."""
        if self._strict:
            raise exc
        logger.warning("heaprank: %s, ranking on the retriever and the priors: %s", cause(exc),
                       exc)
        vocab, where = np.unique(ask.matrix, return_inverse=True)
        counts = LinkCounts(*(np.zeros(len(vocab)) for _ in range(4)))
        docs = DocStats(np.full(n_docs, math.nan), np.zeros(n_docs))
        links = self._links(counts, ask.matrix, where)
        return Evidence(links, docs, None, (f"{cause(exc)}: priors only, not tracked",))

    def _finish(self, ask: _Ask, counts: LinkCounts, docs: DocStats,
                edge_rows: EdgeRows | None) -> Evidence:
        assert ask.where is not None
        counts = mask_pooled(ask.names, counts, self._min_namespaces)
        links = self._links(counts, ask.matrix, ask.where)
        if ask.version is not None:
            if len(self._kept) >= ROW_CACHE_ENTRIES:
                _drop_oldest(self._kept)
            self._kept[ask.key] = (ask.version, links)
        return Evidence(links, docs, edge_rows, ())

    def _links(self, counts: LinkCounts, matrix: np.ndarray, where: np.ndarray) -> RowLinks:
        alpha, beta = linkmath.posterior(counts, self._prior)
        shaped = where.reshape(matrix.shape)
        row_p = linkmath.posterior_mean(alpha, beta)[shaped]
        return RowLinks(matrix, shaped, alpha, beta, row_p, linkmath.noisy_or(row_p), {}, {})

    @staticmethod
    def top_links(links: RowLinks, rows: list[int],
                  generation: Generation) -> dict[int, tuple[tuple[str, float], ...]]:
        """The :data:`TOP_LINKS` strongest links ``(feature, p)`` of these rows (of
        ``generation``, the one ``links`` were read in), strongest first (ties in the row's
        order), worked out for the rows not seen yet and kept with ``links`` (while they are
        kept, a row's top links are too)."""
        known = links.top_links
        if known.keys() >= set(rows):  # the usual case, while the links are kept
            return known
        missing = [r for r in dict.fromkeys(rows) if r not in known]
        if missing:
            names, at = generation.names, np.array(missing)
            p, matrix = links.p[at], links.matrix[at]
            best = np.argsort(-p, axis=1, kind="stable")[:, :TOP_LINKS]
            which = np.arange(len(missing))[:, None]
            for r, ids, ps in zip(missing, matrix[which, best].tolist(), p[which, best].tolist()):
                known[r] = tuple(zip([names[f] for f in ids], ps))
        return known
