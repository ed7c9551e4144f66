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
from typing import Any

import numpy as np

from .._flow import Flow
from .._time import DAY_S
from ..errors import StateError
from ..records import Impression, new_recall_id
from ..scoring import rank
from ..scoring.scorer import Scored
from ..scoring.space import FeatureSpace
from ..state.requests import PutImpression, StateRequest
from .evidence import cause

logger = logging.getLogger("heaprank")

#: Recent recalls whose impression (and the link means their rerank read) a reranker keeps for
#: their feedback.
KEPT_RECALLS = 1_024
#: How long a reranker keeps an impression it stored, in seconds (feedback mostly follows its
#: answer within seconds; later ones read it from the state), so a namespace forgotten through
#: another process leaves this one within that time.
KEPT_IMPRESSION_S = 600.0
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


def impression_of(scored: Scored, recall_id: str, space: FeatureSpace) -> Impression:
    """The impression of a scored rerank: its shown items with their slots and the signal
    values it ranked on (the mean usefulness is what was believed; an explored rerank adds its
    sample, a spreading one the association factors)."""
    seen, signals, request = scored.seen, scored.signals, scored.request
    extra = signals.usage.stored
    if signals.sampled is not None:
        extra = {**extra, "usefulness_sampled": signals.ranked_use}
    if scored.linked is not None:
        extra = {**extra, "association": scored.linked.factor}
    # one row per shown item (only those: k of n): IMPRESSION_SIGNALS, then the extras
    stored = rank.matrix(len(seen.batch), (seen.relevance, signals.age, signals.importance,
                                           signals.use, scored.rules, *extra.values()),
                         scored.top)
    if request.config.intent_recency.get(seen.info.intent) == 0:
        # Recency did not apply to this question (its intent scales it to 0): no age logged,
        # so replay and tune see its recency as neutral, as it was ranked.
        stored[:, 1] = math.nan
    else:
        stored[:, 1] /= DAY_S
    rows = seen.rows.tolist()
    return Impression(
        recall_id, request.namespace, seen.info.qtype, request.when, request.explicit,
        tuple(map(seen.batch.ids.__getitem__, scored.top.tolist())),
        space.slots_of_rows(list(map(rows.__getitem__, scored.top_rows))),
        request.config.doc_features,
        IMPRESSION_SIGNALS + tuple(extra) if extra else IMPRESSION_SIGNALS, stored)


class ImpressionLog:
    """Writes impressions, and keeps what the feedback of a recent recall reads: the impression
    this reranker stored (with ``keep_copies``; not for a state whose impressions live in this
    process), and the link means its rerank read while the state's version stood."""

    def __init__(self, *, strict: bool, keep_copies: bool,
                 mint: Callable[[str], str] | None = None) -> None:
        self._strict = strict
        #: namespace -> a fresh recall id (the state's, where it mints them)
        self.mint: Callable[[str], str] = mint or (lambda namespace: new_recall_id())
        self._keep_copies = keep_copies
        #: recall id -> (monotonic time, the impression stored for it)
        self._stored: dict[str, tuple[float, Impression]] = {}
        #: recall id -> (state version, the rerank's row means, each shown item's row)
        self.means: dict[str, tuple[object, np.ndarray, list[int]]] = {}

    def clear(self) -> None:
        self._stored.clear()
        self.means.clear()

    def track(self, scored: Scored, space: FeatureSpace,
              version: object) -> Flow[StateRequest, tuple[str, str | None]]:
        """Write a scored rerank's impression and keep what its feedback reads: ``(recall id,
        None)``. When the state fails (and the log is not strict) the ranking is still
        returned, untracked: ``(recall id, EXPLAIN's flag of why)``, and its feedback then
        reports an unknown recall."""
        impression = impression_of(scored, self.mint(scored.request.namespace), space)
        try:
            recall_id = yield from self.put(impression)
        except StateError as exc:
            if self._strict:
                raise
            logger.warning("heaprank: %s, impression not recorded: %s", cause(exc), exc)
            return impression.recall_id, f"{cause(exc)}: not tracked"
        if self._keep_copies and recall_id == impression.recall_id:
            self._keep(recall_id, impression)
        if version is not None:  # the link means its feedback would read, while they hold
            remember(self.means, recall_id, (version, scored.evidence.links.p, scored.top_rows))
        return recall_id, None

    def put(self, impression: Impression,
            feedback_id: str | None = None) -> Flow[StateRequest, str]:
        """Write an impression; a generated recall id that is already taken (two reranks in one
        millisecond drawing the same 20 random bits) is drawn again."""
        for _ in range(8):
            held = yield PutImpression(impression, feedback_id)
            if held is not None:
                return str(held)
            impression = replace(impression, recall_id=self.mint(impression.namespace))
        raise StateError("could not draw an unused recall id")

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
