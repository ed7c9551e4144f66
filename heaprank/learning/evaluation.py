"""Tools for evaluating a learned state without letting a user's own feedback leak into its score.

:class:`LeaveNamespaceOut` wraps any :class:`~heaprank.StateBackend` so that every namespace is
scored as a newcomer: it sees what the *other* namespaces taught the shared (global) layer, but
none of its own link evidence and none of its own document usage. Ranking a namespace's questions
through the view therefore measures what a brand-new user would get from the pooled prior, which
is the number to tune shared settings (weights, prior strength) on without scoring a namespace on
its own answers.

Example:
    >>> from heaprank import Reranker
    >>> from heaprank.learning.evaluation import LeaveNamespaceOut
    >>> rr = Reranker()  # ... after feedback from many namespaces
    >>> newcomer_view = rr.with_state(LeaveNamespaceOut(rr.state))
    >>> ranking = newcomer_view.rerank("when did we meet?", [{"id": "a", "text": "We met in May"}],
    ...                                namespace="alice", track=False)
    >>> ranking.ids
    ('a',)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ..errors import StateReadOnlyError
from ..model.evidence import DocStats, EdgeRows, LinkCounts
from ..records import EdgeState, Impression, Update
from ..state.base import StateBackend

__all__ = ["LeaveNamespaceOut"]


class LeaveNamespaceOut:
    """A read-only view of a state in which the namespace being ranked has no history of its own.

    For a read in namespace ``ns``:

    - link evidence: ``ns``'s own counts read as zero, and the global counts are the stored global
      counts minus ``ns``'s contribution (floored at 0), i.e. the pool of every *other* namespace;
    - document usage: every document reads as never used;
    - co-use edges: none.

    Inspection (``list_links``, ``namespaces``, ``stats``) passes through to the wrapped state
    unchanged. Writes raise :class:`~heaprank.StateReadOnlyError`, so rank through the view with
    ``track=False``. The view owns nothing: closing it leaves the wrapped state open.

    Args:
        base: the state to view; it is only read.
    """

    def __init__(self, base: StateBackend) -> None:
        self.base = base

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        """The global evidence of ``features`` without ``namespace``'s share (nor its count
        among the namespaces holding each feature); no own evidence."""
        counts = self.base.read_links(namespace, features)
        own_hidden = np.zeros_like(counts.pos)
        held = (counts.pos + counts.neg) > 0.0
        return LinkCounts(own_hidden, own_hidden.copy(),
                          np.maximum(counts.gpos - counts.pos, 0.0),
                          np.maximum(counts.gneg - counts.neg, 0.0),
                          np.maximum(counts.holders - held, 0.0))

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        """Every document as never used: NaN ``last_used``, zero use count."""
        n = len(ids)
        return DocStats(np.full(n, np.nan), np.zeros(n))

    def read(self, namespace: str, features: Sequence[str],
             ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        """What a rerank reads: :meth:`read_links` and :meth:`read_docs` together."""
        return self.read_links(namespace, features), self.read_docs(namespace, ids)

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        """:meth:`read` and no co-use edges: they are the namespace's own history."""
        return self.read_links(namespace, features), self.read_docs(namespace, ids), EdgeRows.empty()

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        return []

    def edge_state(self, namespace: str, docs: Sequence[str]) -> EdgeState:
        """No edges: they are the namespace's own history."""
        return EdgeState(0, 0, {})

    def put_impression(self, impression: Impression, *, feedback_id: str | None = None) -> str | None:
        raise StateReadOnlyError("LeaveNamespaceOut is a read-only view: rerank through it with track=False")

    def get_impression(self, recall_id: str) -> Impression | None:
        """Always ``None``: the view records no impressions, so it has none to return."""
        return None

    def feedback_log(self, namespace: str | None = None) -> Iterator[Impression]:
        """Empty: the log is each namespace's own history, which the view hides."""
        return iter(())

    def apply(self, updates: Sequence[Update]) -> list[bool]:
        raise StateReadOnlyError("LeaveNamespaceOut is a read-only view: give feedback to the wrapped state")

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        return self.base.list_links(namespace)

    def namespaces(self) -> list[str]:
        return self.base.namespaces()

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        raise StateReadOnlyError("LeaveNamespaceOut is a read-only view: forget through the wrapped state")

    def stats(self) -> dict[str, int]:
        return self.base.stats()

    def close(self) -> None:
        """Nothing to release: the wrapped state stays open and belongs to its owner."""
