"""The impression log's writer: a tracked rerank's impression (what it showed, with the signal
values tuning and replay read), and what this process keeps of a recent recall for its
feedback (the impression itself, the link means its rerank read).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from .._time import DAY_S
from ..errors import StateError
from ..model.signals import LOGGED
from ..model.signals import NAMES as SIGNALS
from ..records import Impression, new_recall_id
from ..scoring import rank
from ..scoring.scorer import Scored
from ..state.base import StateBackend
from ..state.capabilities import AsyncStateBackend
from .evidence import cause

logger = logging.getLogger("heaprank")

#: Recent recalls whose impression (and the link means their rerank read) a reranker keeps for
#: their feedback.
KEPT_RECALLS = 1_024
#: How long a reranker keeps an impression it stored, in seconds (feedback mostly follows its
#: answer within seconds; later ones read it from the state), so a namespace forgotten through
#: another process leaves this one within that time.
KEPT_IMPRESSION_S = 600.0
#: How many recall ids a write draws before giving up (a clash needs two reranks in one
#: millisecond drawing the same 20 random bits).
_DRAWS = 8
#: What an impression stores per shown item, for tuning and replay.
IMPRESSION_SIGNALS = ("relevance", "age_days", "importance", "usefulness", "rules")


def remember(cache: dict[str, Any], key: str, value: Any) -> None:
    """Keep ``value`` under ``key`` in a per-recall cache of at most :data:`KEPT_RECALLS`
    entries, the oldest dropped first (threads may share the reranker: another one may empty or
    change the cache between the two steps of the drop, which then drops nothing)."""
    if len(cache) >= KEPT_RECALLS:
        try:
            cache.pop(next(iter(cache)), None)
        except (StopIteration, RuntimeError):
            pass
    cache[key] = value


def impression_of(scored: Scored, recall_id: str) -> Impression:
    """The impression of a scored rerank: its shown items with their slots and the signal
    values it ranked on (the mean usefulness is what was believed; an explored rerank adds its
    sample, a spreading one the association factors)."""
    seen, signals, request = scored.seen, scored.signals, scored.request
    # the declared signals an impression keeps while their weight is above 0 (their columns),
    # then what replay and the re-fit also read: an Ebbinghaus recency, an explored sample
    weights = request.config.weights
    extra = {name: scored.matrix[:, SIGNALS.index(name)] for name in LOGGED
             if getattr(weights, name) > 0}
    if "recency" in signals.usage.stored:
        extra["recency"] = signals.usage.stored["recency"]
    if signals.sampled is not None:
        extra["usefulness_sampled"] = signals.ranked_use
    # one row per shown item (only those: k of n): IMPRESSION_SIGNALS, then the extras
    stored = rank.matrix(len(seen.batch), (seen.relevance, signals.age, signals.importance,
                                           signals.use, scored.rules, *extra.values()),
                         scored.top)
    if request.config.scoring.intent_recency.get(seen.info.intent) == 0:
        # Recency did not apply to this question (its intent scales it to 0): no age logged,
        # so replay and tune see its recency as neutral, as it was ranked.
        stored[:, 1] = math.nan
    else:
        stored[:, 1] /= DAY_S
    rows = seen.rows.tolist()
    return Impression(
        recall_id, request.namespace, seen.info.qtype, request.when, request.explicit,
        tuple(map(seen.batch.ids.__getitem__, scored.top.tolist())),
        seen.generation.slots_of_rows(list(map(rows.__getitem__, scored.top_rows))),
        request.config.features.doc_features,
        IMPRESSION_SIGNALS + tuple(extra) if extra else IMPRESSION_SIGNALS, stored)


class KeptMeans(NamedTuple):
    """The link means a rerank read: of each entry of its distinct rows (``p``), and the row
    of each shown item (by shown position)."""

    p: np.ndarray
    rows: list[int]

    def at(self, rank: int) -> np.ndarray:
        """The means of the features of the item shown at ``rank`` (from 1), in its row's
        order."""
        row: np.ndarray = self.p[self.rows[rank - 1]]
        return row


class ImpressionLog:
    """Writes impressions, and keeps what the feedback of a recent recall reads: the impression
    this reranker stored, and the link means its rerank read while the state's version stood."""

    def __init__(self, *, strict: bool, mint: Callable[[str], str] | None = None) -> None:
        self._strict = strict
        #: namespace -> a fresh recall id (the state's, where it mints them)
        self.mint: Callable[[str], str] = mint or (lambda namespace: new_recall_id())
        #: recall id -> (monotonic time, the impression stored for it)
        self._stored: dict[str, tuple[float, Impression]] = {}
        #: recall id -> (state version, the rerank's row means, each shown item's row)
        self.means: dict[str, tuple[object, np.ndarray, list[int]]] = {}

    def clear(self) -> None:
        self._stored.clear()
        self.means.clear()

    def track(self, state: StateBackend, scored: Scored,
              version: object) -> tuple[str, str | None]:
        """Write a scored rerank's impression and keep what its feedback reads: ``(recall id,
        None)``. When the state fails (and the log is not strict) the ranking is still
        returned, untracked: ``(recall id, EXPLAIN's flag of why)``, and its feedback then
        reports an unknown recall."""
        impression = impression_of(scored, self.mint(scored.request.namespace))
        try:
            recall_id = self.put(state, impression)
        except StateError as exc:
            return impression.recall_id, self._untracked(exc)
        self._tracked(recall_id, impression, scored, version)
        return recall_id, None

    async def atrack(self, twin: AsyncStateBackend, scored: Scored) -> tuple[str, str | None]:
        """:meth:`track` on a state's async twin."""
        impression = impression_of(scored, self.mint(scored.request.namespace))
        try:
            recall_id = await self.aput(twin, impression)
        except StateError as exc:
            return impression.recall_id, self._untracked(exc)
        self._tracked(recall_id, impression, scored, None)
        return recall_id, None

    def put(self, state: StateBackend, impression: Impression,
            feedback_id: str | None = None) -> str:
        """Write an impression: the recall id that holds it. A generated recall id that is
        already taken (two reranks in one millisecond drawing the same 20 random bits) is drawn
        again."""
        for _ in range(_DRAWS):
            held = state.put_impression(impression, feedback_id=feedback_id)
            if held is not None:
                return str(held)
            impression = self._redrawn(impression)
        raise StateError("could not draw an unused recall id")

    async def aput(self, twin: AsyncStateBackend, impression: Impression,
                   feedback_id: str | None = None) -> str:
        """:meth:`put` on a state's async twin."""
        for _ in range(_DRAWS):
            held = await twin.put_impression(impression, feedback_id=feedback_id)
            if held is not None:
                return str(held)
            impression = self._redrawn(impression)
        raise StateError("could not draw an unused recall id")

    def _redrawn(self, impression: Impression) -> Impression:
        return replace(impression, recall_id=self.mint(impression.namespace))

    def _untracked(self, exc: StateError) -> str:
        if self._strict:
            raise exc
        logger.warning("heaprank: %s, impression not recorded: %s", cause(exc), exc)
        return f"{cause(exc)}: not tracked"

    def _tracked(self, recall_id: str, impression: Impression, scored: Scored,
                 version: object) -> None:
        if recall_id == impression.recall_id:
            self._keep(recall_id, impression)
        if version is not None:  # the link means its feedback would read, while they hold
            remember(self.means, recall_id, (version, scored.evidence.links.p, scored.top_rows))

    def kept_means(self, recall_id: str, version: object) -> KeptMeans | None:
        """The link means the rerank of ``recall_id`` read of its shown items' rows, if the
        state's ``version`` still is the one they were read at (then they are what a read would
        give); taken: a recall's feedback reads them once."""
        read = self.means.pop(recall_id, None)
        if read is None or version is None or read[0] != version:
            return None
        return KeptMeans(read[1], read[2])

    def forget(self, recall_id: str) -> None:
        """Drop what is kept of a recall: a feedback changed its verdicts (its stored copy now
        lags them), or found its copy stale."""
        self._stored.pop(recall_id, None)
        self.means.pop(recall_id, None)

    def kept(self, recall_id: str) -> Impression | None:
        """The impression this reranker stored for ``recall_id``, while it keeps it. What a
        stored impression holds never changes (its verdicts live in the state, and the state
        checks them, and that the recall still exists, inside the feedback's own write), so
        the copy saves a read per feedback (a round trip on Redis)."""
        kept = self._stored.get(recall_id)
        if kept is not None and time.monotonic() - kept[0] <= KEPT_IMPRESSION_S:
            return kept[1]
        return None

    def _keep(self, recall_id: str, impression: Impression) -> None:
        """Keep a stored impression, dropping those past :data:`KEPT_IMPRESSION_S` first
        (oldest first: the cache is in insertion order)."""
        now = time.monotonic()
        stored = self._stored
        try:
            while stored and now - next(iter(stored.values()))[0] > KEPT_IMPRESSION_S:
                stored.pop(next(iter(stored)), None)
        except (StopIteration, RuntimeError):  # another thread changed it meanwhile
            pass
        remember(stored, recall_id, (now, impression))
