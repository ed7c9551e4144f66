"""What a rerank knows of its candidates, as values: the link counts of their features (a
namespace's own and the pooled layer's), their documents' use, the co-use edges among them, and
the posteriors a rerank derives from the counts of its distinct feature rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True, slots=True)
class LinkCounts:
    """Evidence of some features: the namespace's own and the global layer's (which includes
    it), and ``holders``: how many namespaces hold a link of each feature in the pooled layer
    (0 where the state does not say; left out, all 0). :mod:`heaprank.model.privacy` reads it
    to keep a caller's value from other tenants until enough namespaces share it."""

    pos: np.ndarray
    neg: np.ndarray
    gpos: np.ndarray
    gneg: np.ndarray
    holders: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.holders is None:
            object.__setattr__(self, "holders", np.zeros(len(self.pos)))


@dataclass(frozen=True, slots=True)
class DocStats:
    """Per-document usage in one namespace; ``last_used`` is NaN for a never-used document."""

    last_used: np.ndarray
    use_count: np.ndarray


@dataclass(frozen=True, slots=True)
class EdgeRows:
    """The edges among some documents, as stored: positions ``i < j`` into the ids that were
    read, and each edge's ``strength`` (at ``last``), co-activation ``count`` and ``last`` time."""

    i: np.ndarray
    j: np.ndarray
    strength: np.ndarray
    count: np.ndarray
    last: np.ndarray

    @classmethod
    def empty(cls) -> EdgeRows:
        return cls.from_rows([])

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[int, int, float, float, float]]) -> EdgeRows:
        arr = np.array(rows, dtype=np.float64).reshape(-1, 5)
        return cls(arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), arr[:, 2].copy(),
                   arr[:, 3].copy(), arr[:, 4].copy())

    def __len__(self) -> int:
        return len(self.i)


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
