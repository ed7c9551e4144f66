"""The state backend Protocol and the records it stores.

Batch-shaped so scoring stays vectorised: one call reads the link counts of many features of a
namespace together with the global layer; one call applies a whole feedback atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import FeedbackError


@dataclass(frozen=True, slots=True)
class LinkCounts:
    """Evidence of some features: the namespace's own and the global layer's (which includes it)."""

    pos: np.ndarray
    neg: np.ndarray
    gpos: np.ndarray
    gneg: np.ndarray


@dataclass(frozen=True, slots=True)
class DocStats:
    """Per-document usage in one namespace; ``last_used`` is NaN for a never-used document."""

    last_used: np.ndarray
    use_count: np.ndarray
    ignore_count: np.ndarray


@dataclass(frozen=True, slots=True)
class Impression:
    """What one rerank showed: enough to apply feedback later, from any process."""

    recall_id: str
    namespace: str
    query: str
    qtype: str
    time: float
    time_explicit: bool
    ids: tuple[str, ...]
    features: tuple[tuple[str, ...], ...]
    signal_names: tuple[str, ...] = ()
    signals: tuple[tuple[float, ...], ...] = ()
    resolved: dict[str, bool] = field(default_factory=dict)  # id -> used, once feedback came


@dataclass(frozen=True, slots=True)
class FeedbackItem:
    """One shown item's verdict: used (confirm) or ignored (reject with ``reject_weight``)."""

    id: str
    rank: int
    used: bool
    features: tuple[str, ...]
    reject_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class FeedbackBatch:
    recall_id: str
    namespace: str
    time: float
    items: tuple[FeedbackItem, ...]


@dataclass(frozen=True, slots=True)
class FeedbackOutcome:
    """Which items a feedback call applied, and which were already recorded (idempotent)."""

    recall_id: str
    applied: tuple[str, ...]
    already_recorded: tuple[str, ...]


ReadLinks = Callable[[Sequence[str]], LinkCounts]
CreditFn = Callable[[ReadLinks, Sequence[FeedbackItem]], tuple[list[str], np.ndarray, np.ndarray]]


@runtime_checkable
class StateBackend(Protocol):
    """Where heaprank keeps what it learns. Every method is safe to call from several threads."""

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        """Counts of ``features`` in ``namespace`` and in the global layer, in one read."""
        ...

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats: ...

    def put_impression(self, impression: Impression) -> None:
        """Record an impression; a ``recall_id`` already recorded is kept as it is."""
        ...

    def get_impression(self, recall_id: str) -> Impression | None: ...

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

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None: ...

    def stats(self) -> dict[str, int]: ...

    def close(self) -> None: ...


def check_resolution(batch: FeedbackBatch, resolved: dict[str, bool]) -> tuple[list[FeedbackItem], list[str]]:
    """Split a batch into items still to apply and ids already recorded with the same verdict."""
    todo: list[FeedbackItem] = []
    done: list[str] = []
    for item in batch.items:
        previous = resolved.get(item.id)
        if previous is None:
            todo.append(item)
        elif previous == item.used:
            done.append(item.id)
        else:
            was = "used" if previous else "ignored"
            raise FeedbackError(
                f"recall {batch.recall_id}: id {item.id!r} was already recorded as {was}; "
                f"feedback for an impression cannot be changed")
    return todo, done
