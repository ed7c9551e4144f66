"""The state backend Protocol and the records it stores.

Batch-shaped so scoring stays vectorised: one call reads what a rerank needs (link counts of many
features in a namespace and in the global layer, and the stats of the candidates' documents); one
call applies a whole feedback atomically. The layout every backend follows is described in
``docs/design.md`` ("State layout").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import FeedbackError
from ..records import (
    LABEL_OF,
    OPEN,
    DocStats,
    FeedbackBatch,
    FeedbackItem,
    FeedbackOutcome,
    Impression,
    LinkCounts,
)

#: Clock skew allowed when a stored ``last_used`` lies after a feedback's time: a stored time
#: later than this is taken as a bad clock and replaced, so no single call pins recency forever.
LAST_USED_SKEW_S = 300.0

#: Features with this prefix (``doc:<id>``, a caller's document ids) never enter the pooled
#: layer, on every backend: they stay in their namespace, their pooled counts zero, and the
#: pooled listing leaves them out.
OWN_PREFIX = "doc:"

ReadLinks = Callable[[Sequence[str]], LinkCounts]
CreditFn = Callable[[ReadLinks, Sequence[FeedbackItem]], tuple[list[str], np.ndarray, np.ndarray]]


@runtime_checkable
class StateBackend(Protocol):
    """Where heaprank keeps what it learns. Every method is safe to call from several threads.

    A namespace's data (its links, documents, impressions, explicit feedback ids and the feature
    names only it contributed) is reachable only under its own name, and
    :meth:`forget_namespace` removes all of it.
    """

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        """Counts of ``features`` in ``namespace`` and in the global layer, in one read."""
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

    def apply_feedback(self, batch: FeedbackBatch, credit: CreditFn) -> FeedbackOutcome:
        """Apply one feedback atomically and at most once per (recall id, item).

        Inside one transaction: skip items already recorded with the same verdict, raise
        :class:`FeedbackError` on a contradicting one, compute increments with
        ``credit(read_links, items)`` from the current counts, add them to the namespace and the
        global layer, update the used documents' stats, and record the verdicts.
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


def check_resolution(batch: FeedbackBatch, verdicts: Sequence[int]) -> tuple[list[FeedbackItem], list[str]]:
    """Split a batch into items still to apply and ids already recorded with the same verdict.

    ``verdicts`` are the impression's stored verdict codes, indexed by ``rank - 1``.
    """
    todo: list[FeedbackItem] = []
    done: list[str] = []
    for item in batch.items:
        previous = verdicts[item.rank - 1] if item.rank - 1 < len(verdicts) else OPEN
        if previous == OPEN:
            todo.append(item)
        elif previous == item.code:
            done.append(item.id)
        else:
            raise FeedbackError(
                f"recall {batch.recall_id}: id {item.id!r} was already recorded as "
                f"{LABEL_OF.get(previous, previous)}; feedback for an impression cannot be "
                f"changed")
    return todo, done


def new_verdicts(verdicts: Sequence[int], n: int, todo: Sequence[FeedbackItem]) -> list[int]:
    """``verdicts`` (length ``n``) with the verdicts of ``todo`` recorded."""
    out = list(verdicts) if verdicts else [OPEN] * n
    for item in todo:
        out[item.rank - 1] = item.code
    return out


def merge_last_used(old: float, new: float) -> float:
    """The later of two use times, except that a stored time beyond ``new`` by more than the
    allowed skew is a bad clock, replaced by ``new``."""
    if old != old or old > new + LAST_USED_SKEW_S:  # NaN or a bad clock
        return new
    return max(old, new)
