"""The values learning and storage share: recall ids, impressions (what a rerank showed),
the :class:`Update` a feedback becomes, and a feedback's outcome.

Both :mod:`heaprank.learning` and :mod:`heaprank.state` import these records, so neither needs
the other's modules for its values: learning works an :class:`Update` out and hands it to the
state, which only applies it.
"""

from __future__ import annotations

import os
import re
import time as _time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .model.co_use import Adjacency
from .model.features import expand_features

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
    there by that key. A key of 2**63 or more is never made (its millisecond would lie past the
    year 2248) and no SQL integer holds it: such an id is unknown too."""
    if isinstance(recall_id, str) and _RECALL_ID.match(recall_id):
        key = int(recall_id[:16], 16)
        return key if key < 2**63 else None
    return None


def recall_born_ms(recall_id: str) -> int:
    """Wall-clock time (epoch milliseconds) at which a recall id was made: its key's top bits."""
    key = recall_key(recall_id)
    return 0 if key is None else key >> 20


def recall_born_s(recall_id: str) -> float:
    """Wall-clock time (epoch seconds) at which a recall id was made."""
    return recall_born_ms(recall_id) / 1000.0




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


#: A co-use edge as stored: ``(a, b, strength, count, last)`` with ``a < b``.
EdgeRow = tuple[str, str, float, float, float]


class EdgeState(NamedTuple):
    """A namespace's co-use edges around some documents, as a feedback's change is worked out
    from: the version they are at, the namespace's edge count (``total``), and every edge of
    each document asked for (an adjacency map, each edge's list shared by its two documents; a
    copy the caller may change)."""

    version: int
    total: int
    adjacency: Adjacency


@dataclass(frozen=True, slots=True)
class EdgeChange:
    """What one feedback changes of its namespace's co-use edges, worked out from the edges as
    they stood at ``version`` (:func:`heaprank.model.co_use.update`): the edges written (each
    whole), the pairs deleted, and the namespace's edge count after it (``total``)."""

    version: int
    written: tuple[EdgeRow, ...]
    deleted: tuple[tuple[str, str], ...]
    total: int


class Update(NamedTuple):
    """One feedback as a state applies it (:meth:`heaprank.state.base.StateBackend.apply`).

    Learning works it out once, in Python (:mod:`heaprank.learning.feedback`): the verdicts
    to record on the recall's impression, the documents they mark used, and the count
    increments they teach, each feature once (the namespace's counts and, but for
    ``doc:`` features, the pooled ones). A state applies it atomically and at most once: only
    while every position in ``ranks`` is still open in the impression (and, with ``edges``, the
    namespace's co-use edges are still at ``edges.version``); otherwise it writes nothing of it
    and reports it stale, and learning works it out again from what is stored now.

    Attributes:
        recall_id, namespace: The recall whose impression the verdicts go to.
        time: The feedback's time (epoch seconds): a used document's ``last_used``.
        ranks: The shown positions (from 1) this update records, in shown order.
        codes: The verdict code recorded at each of them (:data:`USED` ... :data:`WRONG`).
        used: The ids it records as used, in shown order (their documents' use counts).
        features, dpos, dneg: Each feature once, with its ``pos`` and ``neg`` increments.
        edges: The co-use edges' change, or None.
    """

    recall_id: str
    namespace: str
    time: float
    ranks: tuple[int, ...]
    codes: tuple[int, ...]
    used: tuple[str, ...]
    features: tuple[str, ...]
    dpos: np.ndarray
    dneg: np.ndarray
    edges: EdgeChange | None = None


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
