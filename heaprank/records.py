"""The values learning and storage share: link counts, document stats, impressions and
feedback.

Both :mod:`heaprank.learning` and :mod:`heaprank.state` import these records, so no module of
either needs the other's for its values: learning's stages reach the state through its
interface (:mod:`heaprank.state.capabilities`, :mod:`heaprank.state.requests`), and the
in-process backends borrow only the Beta link math (:mod:`heaprank.learning.links`), which
imports nothing of the state.
"""

from __future__ import annotations

import os
import re
import time as _time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .learning.co_use import CoUse
from .scoring.features import expand_features

#: An impression's verdict codes, per shown item; ``OUTDATED`` and ``WRONG`` are the graded
#: labels of ``feedback(labels=...)`` (not used, like ``IGNORED``, with their own evidence).
OPEN, USED, IGNORED, OUTDATED, WRONG = 0, 1, 2, 3, 4
#: The label names of ``feedback(labels=...)`` and their verdict codes.
LABELS = {"used": USED, "ignored": IGNORED, "outdated": OUTDATED, "wrong": WRONG}
#: Verdict code -> label name (codes 1 to 4).
LABEL_OF = {code: name for name, code in LABELS.items()}

_RECALL_ID = re.compile(r"[0-9a-f]{16}(?:[0-9a-f]{4})?\Z")


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
    """The 64-bit key of a well-formed recall id, else None (such an id is simply unknown).

    A Redis state's ids carry 4 more hex digits, their namespace's bucket (where the impression
    lives); the key is their first 16 digits, so such an id copied to another backend resolves
    there by that key."""
    if isinstance(recall_id, str) and _RECALL_ID.match(recall_id):
        return int(recall_id[:16], 16)
    return None


def recall_born_ms(recall_id: str) -> int:
    """Wall-clock time (epoch milliseconds) at which a recall id was made: its key's top bits."""
    key = recall_key(recall_id)
    return 0 if key is None else key >> 20


def recall_born_s(recall_id: str) -> float:
    """Wall-clock time (epoch seconds) at which a recall id was made."""
    return recall_born_ms(recall_id) / 1000.0


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
        return {i: v == USED for i, v in zip(self.ids, self.verdicts) if v != OPEN}


@dataclass(frozen=True, slots=True)
class FeedbackItem:
    """One shown item's verdict: used (confirm) or not (reject with ``reject_weight``).

    ``verdict`` is the code stored for it (:data:`USED`, :data:`IGNORED`, :data:`OUTDATED`,
    :data:`WRONG`); 0 means the plain one of ``used``."""

    id: str
    rank: int
    used: bool
    features: tuple[str, ...]
    reject_weight: float = 1.0
    verdict: int = 0

    @property
    def code(self) -> int:
        """The verdict code stored for this item."""
        return self.verdict or (USED if self.used else IGNORED)


_ITEM_SETTERS = tuple(FeedbackItem.__dict__[name].__set__
                      for name in ("id", "rank", "used", "features", "reject_weight", "verdict"))


def new_feedback_item(id: str, rank: int, used: bool, features: tuple[str, ...],
                      reject_weight: float, verdict: int = 0, /) -> FeedbackItem:
    """A :class:`FeedbackItem` as the reranker makes them (the fields in order), its slots set
    directly: the frozen dataclass's ``__init__`` costs more, and every feedback builds one per
    shown item."""
    item = object.__new__(FeedbackItem)
    put_id, put_rank, put_used, put_features, put_weight, put_verdict = _ITEM_SETTERS
    put_id(item, id)
    put_rank(item, rank)
    put_used(item, used)
    put_features(item, features)
    put_weight(item, reject_weight)
    put_verdict(item, verdict)
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


_OUTCOME_SETTERS = tuple(FeedbackOutcome.__dict__[name].__set__
                         for name in ("recall_id", "applied", "already_recorded"))


def new_outcome(recall_id: str, applied: tuple[str, ...],
                already_recorded: tuple[str, ...], /) -> FeedbackOutcome:
    """A :class:`FeedbackOutcome`, its slots set directly (a third of the frozen dataclass's
    ``__init__``: every feedback makes one or two)."""
    made = object.__new__(FeedbackOutcome)
    put_recall_id, put_applied, put_already = _OUTCOME_SETTERS
    put_recall_id(made, recall_id)
    put_applied(made, applied)
    put_already(made, already_recorded)
    return made


class UsedFeedback(NamedTuple):
    """``feedback(recall_id, used)`` on a recall with no feedback yet, as a state's lean path
    takes it (:class:`~heaprank.state.base.LeanFeedback`): the same counts as the general path's
    :class:`FeedbackBatch`, which the state then never has to be handed.

    ``a0``, ``b0``, ``kappa`` and ``em`` are the learning settings (as in :class:`FeedbackBatch`);
    ``time`` is the feedback's (``None``: the impression's own time if its caller chose it, else
    the wall clock); an ignored item shown at rank ``r`` weighs ``reject_weights[r]``, past the
    table's end ``reject_weight(r)``; ``read`` is what the rerank read of the shown rows' link
    means, ``(state version, means, row of each shown item)``, used while the version stands.
    """

    recall_id: str
    namespace: str | None
    used: Sequence[str]
    time: float | None
    a0: float
    b0: float
    kappa: float
    em: bool
    reject_weights: Sequence[float]
    reject_weight: Callable[[int], float]
    read: tuple[object, np.ndarray, Sequence[int]] | None = None
