"""The state backend Protocol: where heaprank keeps what it learns.

Batch-shaped so scoring stays vectorised: one call reads what a rerank needs (link counts of many
features in a namespace and in the pooled layer, and the stats of the candidates' documents);
one call applies feedback :class:`~heaprank.records.Update`\\ s, which learning worked out (a
state computes no credit: it adds the increments it is given). The layout every backend follows
is described in ``docs/design.md`` ("State layout").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..model.evidence import DocStats, LinkCounts
from ..records import OPEN, Impression, Update
from . import codec

#: Clock skew allowed when a stored ``last_used`` lies after a feedback's time: a stored time
#: later than this is taken as a bad clock and replaced, so no single call pins recency forever.
LAST_USED_SKEW_S = 300.0

#: Features with this prefix (``doc:<id>``, a caller's document ids) never enter the pooled
#: layer, on every backend: they stay in their namespace, their pooled counts zero, and the
#: pooled listing leaves them out.
OWN_PREFIX = "doc:"


@runtime_checkable
class StateBackend(Protocol):
    """Where heaprank keeps what it learns. Every method is safe to call from several threads.

    A namespace's data (its links, documents, impressions, explicit feedback ids and the feature
    names only it contributed) is reachable only under its own name, and
    :meth:`forget_namespace` removes all of it.
    """

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        """Counts of ``features`` in ``namespace`` and in the global layer, in one read, with
        how many namespaces hold each (``LinkCounts.holders``; a backend that leaves them out
        reads 0, and then no caller's value borrows pooled counts:
        ``Config.learning.pooled_min_namespaces``)."""
        ...

    def read(self, namespace: str, features: Sequence[str],
             ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        """Everything a rerank reads, in one read: link counts and the documents' stats."""
        ...

    def put_impression(self, impression: Impression, *, feedback_id: str | None = None) -> str | None:
        """Record an impression and return the recall id that holds it.

        With ``feedback_id`` (an explicit id chosen by the caller, scoped to the namespace), an
        impression already recorded under that id in that namespace is kept and its recall id
        returned. Without it, a ``recall_id`` already taken returns None and writes nothing.
        """
        ...

    def get_impression(self, recall_id: str) -> Impression | None: ...

    def feedback_log(self, namespace: str | None = None) -> Iterator[Impression]:
        """The impressions that received feedback (any verdict), decoded, oldest recall first:
        those of ``namespace``, or of every namespace with ``None``. What tuning and replay
        read; an impression pruned or forgotten meanwhile is simply not yielded."""
        ...

    def apply(self, updates: Sequence[Update]) -> list[bool]:
        """Apply feedback updates, each atomically and at most once, in order.

        An update is applied only if its recall's impression (of its namespace) exists and
        every position in ``update.ranks`` is still open there (and, with ``update.edges``, the
        namespace's co-use edges are still at ``edges.version``): then, in one atomic step, its
        increments are added to the namespace's counts and (but for ``doc:`` features) the
        pooled ones, its used documents' stats are updated (:func:`merge_last_used`, one more
        use), its verdicts are recorded and its edges written. Otherwise nothing of it is
        written and its entry in the result is False (stale: the caller works it out again).
        A state may apply the whole list in one transaction (SQLite does: one commit).
        """
        ...

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Every feature with evidence in ``namespace`` (``None``: the global layer)."""
        ...

    def namespaces(self) -> list[str]: ...

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        """Remove every record of ``namespace``; with ``scrub_global`` its evidence leaves the
        pool too. Features that only this namespace ever had leave the pool in either case:
        their names are its data (a source, a kind, a document id)."""
        ...

    def stats(self) -> dict[str, int]: ...

    def close(self) -> None: ...


def still_open(verdicts: Sequence[int], update: Update) -> bool:
    """Whether every position ``update`` records is still open in ``verdicts`` (an
    impression's stored codes, indexed by ``rank - 1``): the condition of applying it."""
    n = len(verdicts)
    return all(rank - 1 >= n or verdicts[rank - 1] == OPEN for rank in update.ranks)


def with_codes(verdicts: Sequence[int], n: int, update: Update) -> list[int]:
    """``verdicts`` (length ``n``; empty: all open) with ``update``'s codes recorded."""
    out = list(verdicts) if verdicts else [OPEN] * n
    for rank, code in zip(update.ranks, update.codes):
        out[rank - 1] = code
    return out


def merge_last_used(old: float, new: float) -> float:
    """The later of two use times, except that a stored time beyond ``new`` by more than the
    allowed skew is a bad clock, replaced by ``new``."""
    if old != old or old > new + LAST_USED_SKEW_S:  # NaN or a bad clock
        return new
    return max(old, new)


def paged_log(read_page: Callable[[int], Sequence[tuple[int, str, bytes]]],
              page_size: int) -> Iterator[Impression]:
    """The impressions of a feedback log, oldest recall first, read page by page:
    ``read_page(after)`` gives the next ``(key, namespace, body)`` rows with a key above
    ``after``, at most ``page_size`` of them (each page in a short read of its own, so a long
    log neither sits in memory at once nor holds a connection while the caller works)."""
    after = -1
    while True:
        page = read_page(after)
        for key, name, body in page:
            yield codec.decode_impression(f"{key:016x}", name, bytes(body))
        if len(page) < page_size:
            return
        after = page[-1][0]
