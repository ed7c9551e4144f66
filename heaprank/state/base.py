"""The state backend Protocol and the records it stores.

Batch-shaped so scoring stays vectorised: one call reads what a rerank needs (link counts of many
features in a namespace and in the global layer, and the stats of the candidates' documents); one
call applies a whole feedback atomically. The layout every backend follows is described in
``docs/design.md`` ("State layout").
"""

from __future__ import annotations

import os
import re
import time as _time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from .._accel import speedups
from ..assoc import CoUse
from ..errors import FeedbackError
from ..features import expand_features
from . import codec
from .edges import EdgeRows

#: Clock skew allowed when a stored ``last_used`` lies after a feedback's time: a stored time
#: later than this is taken as a bad clock and replaced, so no single call pins recency forever.
LAST_USED_SKEW_S = 300.0

_RECALL_ID = re.compile(r"[0-9a-f]{16}\Z")
instances = None if speedups is None else speedups.instances


#: Random words from the OS's generator (what ``secrets`` draws from), fetched 1,024 at a time:
#: one system call per thousand recall ids, not one each. A list iterator's next() is atomic,
#: so threads never share a word; a forked child starts a fresh batch of its own.
_WORDS_PER_FETCH = 1_024
_random_words: Iterator[int] = iter(())


def _fresh_words() -> None:
    global _random_words
    _random_words = iter(())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_words)


def _random_bits20() -> int:
    global _random_words
    word = next(_random_words, None)
    if word is None:
        _random_words = iter(array("I", os.urandom(4 * _WORDS_PER_FETCH)).tolist())
        word = next(_random_words)
    return word & 0xFFFFF


def new_recall_id() -> str:
    """A fresh recall id: 16 hex digits of a 64-bit key, the wall-clock millisecond in the high
    43 bits (so keys sort by age and expire by range) and 20 random bits (from the OS's
    cryptographic generator: an id cannot be guessed from another)."""
    ms = _time.time_ns() // 1_000_000
    return f"{(ms << 20) | _random_bits20():016x}"


def recall_key(recall_id: str) -> int | None:
    """The 64-bit key of a well-formed recall id, else None (such an id is simply unknown)."""
    if isinstance(recall_id, str) and _RECALL_ID.match(recall_id):
        return int(recall_id, 16)
    return None


def recall_born_s(recall_id: str) -> float:
    """Wall-clock time (epoch seconds) at which a recall id was made."""
    key = recall_key(recall_id)
    return 0.0 if key is None else (key >> 20) / 1000.0


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


@dataclass(frozen=True, slots=True)
class Impression:
    """What one rerank showed: enough to apply feedback later, from any process.

    No query text is kept: feedback needs only the question type and each item's slots.

    Attributes:
        recall_id: From :func:`new_recall_id`.
        namespace: The namespace that owns it; feedback for another namespace is refused.
        qtype: Question type of the query.
        time: The rerank's ``now`` (epoch seconds); ``time_explicit`` if the caller chose it.
        ids: Shown ids, best first.
        slots: Per shown item, its feature slots (see :func:`expand_features`).
        doc_features: Whether each item's features end with ``doc:<id>``.
        signal_names, signals: Per shown item, the signal values the ranking used (stored as
            float32; an ``(n, m)`` array is accepted when writing, tuples come back).
        verdicts: Per shown item, 0 open, 1 used, 2 ignored (empty: all open).
    """

    recall_id: str
    namespace: str
    qtype: str
    time: float
    time_explicit: bool
    ids: tuple[str, ...]
    slots: tuple[tuple[str, ...], ...]
    doc_features: bool = False
    signal_names: tuple[str, ...] = ()
    signals: tuple[tuple[float, ...], ...] | np.ndarray = ()
    verdicts: tuple[int, ...] = ()

    def features_of(self, i: int) -> tuple[str, ...]:
        """The retrieval features of shown item ``i``, rebuilt from its slots."""
        return expand_features(self.qtype, self.slots[i], self.ids[i] if self.doc_features else None)

    @property
    def features(self) -> tuple[tuple[str, ...], ...]:
        """The retrieval features of every shown item, in shown order."""
        return tuple(self.features_of(i) for i in range(len(self.ids)))

    @property
    def resolved(self) -> dict[str, bool]:
        """Shown id -> used, for the items that already have a verdict."""
        return {i: v == codec.USED for i, v in zip(self.ids, self.verdicts) if v != codec.OPEN}

    def encode(self) -> bytes:
        return codec.encode(qtype=self.qtype, time=self.time, time_explicit=self.time_explicit,
                            doc_features=self.doc_features, ids=self.ids, slots=self.slots,
                            signal_names=self.signal_names,
                            signals=self.signals if len(self.signals) else None,
                            verdicts=self.verdicts or None)

    @classmethod
    def decode(cls, recall_id: str, namespace: str, body: bytes) -> Impression:
        d = codec.Decoded(body)
        return cls(recall_id=recall_id, namespace=namespace, qtype=d.qtype, time=d.time,
                   time_explicit=d.time_explicit, ids=d.ids, slots=d.slots,
                   doc_features=d.doc_features, signal_names=d.signal_names,
                   signals=tuple(map(tuple, d.signals.tolist())), verdicts=d.verdicts)


_IMPRESSION_FIELDS = ("recall_id", "namespace", "qtype", "time", "time_explicit", "ids", "slots",
                      "doc_features", "signal_names", "signals", "verdicts")
_IMPRESSION_SLOTS = tuple(Impression.__dict__[name] for name in _IMPRESSION_FIELDS)


def new_impression(recall_id: str, namespace: str, qtype: str, time: float, time_explicit: bool,
                   ids: tuple[str, ...], slots: tuple[tuple[str, ...], ...], doc_features: bool,
                   signal_names: tuple[str, ...], signals: np.ndarray, /) -> Impression:
    """An :class:`Impression` as a rerank makes it (no verdicts yet), its slots set directly
    (by the C kernel when built): the frozen dataclass's ``__init__`` costs more, and every
    tracked rerank makes one."""
    values = (recall_id, namespace, qtype, time, time_explicit, ids, slots, doc_features,
              signal_names, signals, ())
    if instances is not None:
        made = instances(Impression, _IMPRESSION_SLOTS, [values])
        if made is not None:
            return made[0]  # type: ignore[no-any-return]
    item = object.__new__(Impression)
    for slot, value in zip(_IMPRESSION_SLOTS, values):
        slot.__set__(item, value)
    return item


@dataclass(frozen=True, slots=True)
class FeedbackItem:
    """One shown item's verdict: used (confirm) or ignored (reject with ``reject_weight``)."""

    id: str
    rank: int
    used: bool
    features: tuple[str, ...]
    reject_weight: float = 1.0


_ITEM_SETTERS = tuple(FeedbackItem.__dict__[name].__set__
                      for name in ("id", "rank", "used", "features", "reject_weight"))


def new_feedback_item(id: str, rank: int, used: bool, features: tuple[str, ...],
                      reject_weight: float, /) -> FeedbackItem:
    """A :class:`FeedbackItem` as the reranker makes them (the fields in order), its slots set
    directly: the frozen dataclass's ``__init__`` costs more, and every feedback builds one per
    shown item."""
    item = object.__new__(FeedbackItem)
    put_id, put_rank, put_used, put_features, put_weight = _ITEM_SETTERS
    put_id(item, id)
    put_rank(item, rank)
    put_used(item, used)
    put_features(item, features)
    put_weight(item, reject_weight)
    return item


@dataclass(frozen=True, slots=True)
class FeedbackBatch:
    """One feedback call's verdicts for items of one impression.

    ``a0``, ``b0``, ``kappa`` and ``em`` are the learning settings the credit uses (the Beta
    prior, the pooled share, EM or uniform credit): a backend that computes the credit next to
    its data (a Redis script) reads them here; the others call the ``credit`` function.

    With ``co_use`` set, the feedback also strengthens the co-use edges between the impression's
    used items (:func:`heaprank.state.edges.co_use_pairs`), in the same atomic step; ``shown``
    is the impression's shown ids in order, which the pairs are read from.

    ``means`` (rank -> the posterior mean of each of that item's features, in its features'
    order) are what the rerank read for used items while the state's ``version`` was
    ``means_version``: a backend whose version still equals it may take them instead of
    reading the links again (the memory backend does; the others ignore them). They are the
    same numbers a read would give, so the credit does not change.
    """

    recall_id: str
    namespace: str
    time: float
    items: tuple[FeedbackItem, ...]
    a0: float = 0.02
    b0: float = 1.98
    kappa: float = 50.0
    em: bool = True
    co_use: CoUse | None = None
    shown: tuple[str, ...] = ()
    means: Mapping[int, np.ndarray] = field(default_factory=dict)
    means_version: object = None


@dataclass(frozen=True, slots=True)
class FeedbackOutcome:
    """Which items a feedback call applied, and which were already recorded (idempotent)."""

    recall_id: str
    applied: tuple[str, ...]
    already_recorded: tuple[str, ...]


_OUTCOME_SLOTS = tuple(FeedbackOutcome.__dict__[name]
                       for name in ("recall_id", "applied", "already_recorded"))


def new_outcome(recall_id: str, applied: tuple[str, ...],
                already_recorded: tuple[str, ...], /) -> FeedbackOutcome:
    """A :class:`FeedbackOutcome`, its slots set by the C kernel when built (a third of what
    the frozen dataclass's ``__init__`` costs, on every feedback of the memory state's lean
    path)."""
    if instances is not None:
        made = instances(FeedbackOutcome, _OUTCOME_SLOTS, [(recall_id, applied, already_recorded)])
        if made is not None:
            return made[0]  # type: ignore[no-any-return]
    return FeedbackOutcome(recall_id, applied, already_recorded)


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


@runtime_checkable
class EdgeBackend(Protocol):
    """A backend that stores co-use edges (every backend of heaprank does; a backend of your own
    needs these two only for ``Config(co_use=...)``)."""

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        """:meth:`StateBackend.read` plus the edges among ``ids``, in the same read."""
        ...

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        """Every edge of ``namespace`` as stored: ``(a, b, strength, count, last)``, ``a < b``,
        sorted."""
        ...


@runtime_checkable
class AsyncStateBackend(Protocol):
    """The hot path of a :class:`StateBackend` for an event loop: what ``Reranker.arerank`` and
    ``afeedback`` call, with the same meaning as the sync methods of the same names.

    A sync backend that has one offers it as ``async_backend()`` (called on the running loop,
    returning None when it has none for it); the reranker's async methods fall back to running
    the sync backend in a worker thread.
    """

    async def read(self, namespace: str, features: Sequence[str],
                   ids: Sequence[str]) -> tuple[LinkCounts, DocStats]: ...

    async def put_impression(self, impression: Impression, *,
                             feedback_id: str | None = None) -> str | None: ...

    async def get_impression(self, recall_id: str) -> Impression | None: ...

    async def apply_feedback(self, batch: FeedbackBatch, credit: CreditFn) -> FeedbackOutcome: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class AsyncEdgeBackend(Protocol):
    """An :class:`AsyncStateBackend` that also stores co-use edges: its ``apply_feedback``
    honours ``batch.co_use`` and it reads edges as :class:`EdgeBackend` does. With
    ``Config(co_use=...)`` the reranker's async methods use an async twin only if it is one;
    otherwise they run the sync backend in a worker thread."""

    async def read_with_edges(self, namespace: str, features: Sequence[str],
                              ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]: ...


def check_resolution(batch: FeedbackBatch, verdicts: Sequence[int]) -> tuple[list[FeedbackItem], list[str]]:
    """Split a batch into items still to apply and ids already recorded with the same verdict.

    ``verdicts`` are the impression's stored verdict codes, indexed by ``rank - 1``.
    """
    todo: list[FeedbackItem] = []
    done: list[str] = []
    for item in batch.items:
        previous = verdicts[item.rank - 1] if item.rank - 1 < len(verdicts) else codec.OPEN
        if previous == codec.OPEN:
            todo.append(item)
        elif (previous == codec.USED) == item.used:
            done.append(item.id)
        else:
            was = "used" if previous == codec.USED else "ignored"
            raise FeedbackError(
                f"recall {batch.recall_id}: id {item.id!r} was already recorded as {was}; "
                f"feedback for an impression cannot be changed")
    return todo, done


def new_verdicts(verdicts: Sequence[int], n: int, todo: Sequence[FeedbackItem]) -> list[int]:
    """``verdicts`` (length ``n``) with the verdicts of ``todo`` recorded."""
    out = list(verdicts) if verdicts else [codec.OPEN] * n
    for item in todo:
        out[item.rank - 1] = codec.USED if item.used else codec.IGNORED
    return out


def merge_last_used(old: float, new: float) -> float:
    """The later of two use times, except that a stored time beyond ``new`` by more than the
    allowed skew is a bad clock, replaced by ``new``."""
    if old != old or old > new + LAST_USED_SKEW_S:  # NaN or a bad clock
        return new
    return max(old, new)
