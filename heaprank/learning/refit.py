"""Continuous re-fitting: the signal weights re-fitted from the state's own impression log after
every ``Config.refit.every`` feedbacks, kept in the state so that every reranker sharing it
agrees (docs/design.md, "Continuous re-fitting").

A re-fit is :func:`heaprank.learning.tuning.tune` on the latest ``Config.refit.window``
impressions of the log: a conditional logit shrunk
(``Config.refit.shrinkage``) toward the weights in use, which moves only when the fit on the
earlier 80% predicts the latest 20% better. Its record also says what the learned signals are
worth on those latest impressions: the held-out MRR of the shown items re-ordered by the
weights that apply, next to relevance alone. It runs at feedback time, after the feedback is
stored, never inside a rerank; ``rerank`` only compares a clock with the next poll time.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..config import Config, Weights
from ..errors import StateError
from ..model.examination import fit_pbm
from ..records import IGNORED, USED, FeedbackOutcome, Impression
from ..state.base import StateBackend
from ..state.weights import WeightStore, record_version, weight_store
from .choices import ChoiceLog, heldout_scores, weight_names, weight_vector
from .feedback import FeedbackStage
from .guard import first_stage, held_weights

__all__ = ["FittedWeights", "Refitter", "adopted", "describe_fit", "describe_rejects",
           "describe_types", "fit_examination", "fit_weights"]

logger = logging.getLogger("heaprank")

#: The later share of the log each re-fit is checked on (as ``tune``'s ``holdout``).
HOLDOUT = 0.2
#: With ``Config.refit.qtypes``, a question type's fit is pulled this hard toward the pooled
#: weights (as ``tune``'s ``namespace_shrinkage``).
QTYPE_SHRINKAGE = 4.0


@dataclass(frozen=True, slots=True)
class FittedWeights:
    """The state's fitted-weights record.

    Attributes:
        version: Raised by one with every write; readers adopt a record of another version.
        weights: The weights that apply (the fit's if it moved, else those it started from).
        fitted_at: Wall-clock time of the fit (epoch seconds).
        moved, reason: Whether the held-out check let the fit move, and why (``tune``'s).
        impressions: Usable impressions the fit read; ``heldout``: how many were held out.
        heldout_mrr, heldout_mrr_relevance: On the held-out impressions, the MRR of the first
            used item with the shown items re-ordered by the weights that apply (fitted on
            the earlier part only) and by relevance alone; ``gain`` is their difference.
        labels: The graded labels the log held (``outdated``, ``wrong``).
        qtype_weights: With ``Config.refit.qtypes``, the weights of each question type whose
            own fit moved (pulled toward the pooled ones); else empty.
        held: The weights of each question type the per-type guard holds back from the pooled
            weights (:mod:`.guard`: the fit would have cost it): those in force before, or
            relevance alone.
        types: The held-out check of each question type (:meth:`.guard.TypeCheck.to_dict`:
            its MRR by the first stage, the weights in force, the fit; what applies; ``gain``).
        examination, examination_impressions: With ``Config.learning.reject_discount="fitted"``, the
            examination curve fitted on the log (``theta_r / theta_1`` from rank 1, the reject
            weight of an ignored item at rank r; :func:`fit_examination`) and the impressions
            it read; None (and 0) while the log holds fewer than
            ``Config.refit.reject_impressions``.
    """

    version: int
    weights: Weights
    fitted_at: float
    moved: bool
    reason: str
    impressions: int = 0
    heldout: int = 0
    heldout_mrr: float | None = None
    heldout_mrr_relevance: float | None = None
    labels: Mapping[str, int] | None = None
    qtype_weights: Mapping[str, Weights] | None = None
    held: Mapping[str, Weights] | None = None
    types: Mapping[str, Mapping[str, Any]] | None = None
    examination: tuple[float, ...] | None = None
    examination_impressions: int = 0

    @property
    def gain(self) -> float | None:
        """Held-out MRR of the learned signals over relevance alone (None: no check ran)."""
        if self.heldout_mrr is None or self.heldout_mrr_relevance is None:
            return None
        return self.heldout_mrr - self.heldout_mrr_relevance

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["weights"] = {n: getattr(self.weights, n) for n in weight_names()}
        out["labels"] = dict(self.labels or {})
        for name in ("qtype_weights", "held"):
            out[name] = {q: {n: getattr(w, n) for n in weight_names()}
                         for q, w in (getattr(self, name) or {}).items()}
        out["types"] = {q: dict(c) for q, c in (self.types or {}).items()}
        out["gain"] = self.gain
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> FittedWeights | None:
        """The record stored as ``text``; None for none or one this version cannot read."""
        if not text:
            return None
        try:
            data = json.loads(text)
            data.pop("gain", None)
            data["weights"] = Weights(**data["weights"])
            for name in ("qtype_weights", "held"):
                data[name] = {q: Weights(**w) for q, w in (data.get(name) or {}).items()}
            curve = data.get("examination")
            data["examination"] = None if curve is None else tuple(map(float, curve))
            return cls(**data)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def fit_weights(state: StateBackend, config: Config, version: int,
                held: Collection[str] = ()) -> FittedWeights | None:
    """Re-fit ``config.weights`` on the latest ``config.refit.window`` impressions of
    ``state``'s log: the record to store as ``version``, or None while they hold too few usable
    impressions to fit at all. ``held``: the types of ``config.qtype_weights`` that the guard
    holds (the others have weights of their own, which the pooled fit does not move)."""
    from .tuning import MIN_HELDOUT, MIN_IMPRESSIONS, pooled_fit

    impressions = deque(state.feedback_log(None), maxlen=config.refit.window)
    log = ChoiceLog(impressions)
    n = len(log)
    late = np.arange(n - int(round(HOLDOUT * n)), n)
    if n < MIN_IMPRESSIONS or len(late) < MIN_HELDOUT:
        return None
    fit = pooled_fit(log, config, shrinkage=config.refit.shrinkage, holdout=HOLDOUT,
                     only=config.refit.signals, own=frozenset(config.qtype_weights) - set(held))
    _, mrr_relevance = heldout_scores(log, late, weight_vector(first_stage(config)),
                                      config.retention.half_life_s,
                                      config.retention.recency_floor)
    mrr = fit.heldout_mrr_after if fit.moved else fit.heldout_mrr_before
    qtypes = _qtype_fits(impressions, replace(config, weights=fit.weights)) \
        if config.refit.qtypes else {}
    curve, seen = fit_examination(impressions, config.refit.reject_impressions) \
        if config.learning.reject_discount == "fitted" else (None, 0)
    return FittedWeights(version=version, weights=fit.weights, fitted_at=time.time(),
                         moved=fit.moved, reason=fit.reason, impressions=n, heldout=len(late),
                         heldout_mrr=mrr, heldout_mrr_relevance=mrr_relevance,
                         labels=dict(log.labels), qtype_weights=qtypes,
                         held={q: w for q, w in held_weights(fit.types, config).items()
                               if q not in qtypes},  # (a type's own fit checked itself)
                         types={q: c.to_dict() for q, c in fit.types.items()}, examination=curve,
                         examination_impressions=seen)


def fit_examination(impressions: Iterable[Impression],
                    min_impressions: int) -> tuple[tuple[float, ...] | None, int]:
    """The examination curve of the log's readers (:func:`heaprank.model.examination.fit_pbm`)
    and how many impressions it read: every shown item used or ignored, its usefulness one
    parameter per question type, relevance fifth and tenth of the usefulness the ranking
    believed (the item's own signals, so that rank and what put the item there are told
    apart; a key as fine as the shape row leaves each parameter a handful of items).
    ``(None, n)`` below ``min_impressions`` impressions, or when the fit cannot say anything."""
    groups: dict[tuple[str, int, int], int] = {}
    ranks: list[int] = []
    keys: list[int] = []
    used: list[bool] = []
    n = 0
    for imp in impressions:
        before = len(ranks)
        for i, code in enumerate(imp.verdicts):
            if code in (USED, IGNORED):
                ranks.append(i + 1)
                key = (imp.qtype, _bin(imp, i, "relevance", 5), _bin(imp, i, "usefulness", 10))
                keys.append(groups.setdefault(key, len(groups)))
                used.append(code == USED)
        n += len(ranks) > before
    if n < min_impressions:
        return None, n
    fit = fit_pbm(np.array(ranks), np.array(keys), np.array(used))
    return (None if fit is None else tuple(round(float(t), 4) for t in fit.theta)), n


def _bin(imp: Impression, i: int, signal: str, bins: int) -> int:
    """Which of ``bins`` equal bins of [0, 1] shown item ``i``'s logged ``signal`` falls in
    (-1: not logged)."""
    if signal not in imp.signal_names or i >= len(imp.signals):
        return -1
    value = float(imp.signals[i][imp.signal_names.index(signal)])
    return min(max(int(value * bins), 0), bins - 1) if math.isfinite(value) else -1


def _qtype_fits(impressions: Iterable[Impression], config: Config) -> dict[str, Weights]:
    """Each question type's own fit (its impressions only, pulled with
    :data:`QTYPE_SHRINKAGE` toward its current weights: ``config.qtype_weights``, else the
    pooled ``config.weights``), where its held-out check lets it move."""
    from .tuning import pooled_fit

    by_qtype: dict[str, list[Impression]] = {}
    for imp in impressions:
        by_qtype.setdefault(imp.qtype, []).append(imp)
    out: dict[str, Weights] = {}
    for qtype, mine in sorted(by_qtype.items()):
        start = replace(config, weights=config.qtype_weights.get(qtype, config.weights))
        found = pooled_fit(ChoiceLog(mine), start, shrinkage=QTYPE_SHRINKAGE, holdout=HOLDOUT,
                           only=config.refit.signals)
        if found.moved:
            out[qtype] = found.weights
        elif qtype in config.qtype_weights:
            out[qtype] = config.qtype_weights[qtype]
    return out


def describe_fit(fitted: dict[str, Any] | None) -> str:
    """When the state's weights were last fitted, and what the held-out check said."""
    if fitted is None:
        return "never (the config's weights; a re-fit runs every Config.refit.every feedbacks)"
    when = datetime.fromtimestamp(fitted["fitted_at"], timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    gain = fitted["gain"]
    held = "no held-out check" if gain is None else (
        f"held-out MRR {fitted['heldout_mrr']:.3f} vs relevance alone "
        f"{fitted['heldout_mrr_relevance']:.3f} ({gain:+.3f}) on the latest {fitted['heldout']} "
        f"impressions")
    return (f"{when} UTC (version {fitted['version']}, {fitted['impressions']} impressions, "
            f"{'moved' if fitted['moved'] else 'kept'}); {held}")


def describe_types(fitted: dict[str, Any] | None) -> list[str]:
    """One line per question type of the last fit's held-out check: the held-out gain over
    the first stage's order of what ranks it, and what that is (:mod:`.guard`)."""
    types = (fitted or {}).get("types") or {}
    return [f"{q:<8} {c['gain']:+.3f} over the first stage on {c['heldout']} held-out "
            f"impressions ({c['applies']})" for q, c in sorted(types.items())]


def describe_rejects(rejects: dict[str, Any]) -> str:
    """The reject weights in force (``stats()["reject_weights"]``), as one line."""
    weights = ", ".join(f"{w:.2f}" for w in rejects["weights"])
    if rejects["curve"] == "fitted":
        return f"fitted on {rejects['impressions']} impressions, ranks 1-10: {weights}"
    wait = f" (fitted from {rejects['needs']} impressions with feedback; the log holds " \
        f"{rejects['impressions']} at the last re-fit)" if rejects["discount"] == "fitted" else ""
    return f"{rejects['curve']}{wait}, ranks 1-10: {weights}"


def adopted(config: Config, record: FittedWeights, held_before: Collection[str] = ()) -> Config:
    """``config`` ranking with ``record``'s weights (and its question types' ones, over those
    configured, with ``Config.refit.qtypes``), and the types the guard holds with their held
    weights; ``held_before``: the types ``config`` holds from an earlier record (released
    unless held again)."""
    qtypes = {q: w for q, w in config.qtype_weights.items() if q not in held_before}
    qtypes.update(record.held or {})
    if config.refit.qtypes and record.qtype_weights:
        qtypes.update(record.qtype_weights)
    return replace(config, weights=record.weights, qtype_weights=qtypes)


class Refitter:
    """One reranker's side of continuous re-fitting: it counts the feedbacks given through
    it, fits when their count reaches ``refit.every``, and polls the state for a record of
    another version every ``refit.poll_s`` seconds."""

    def __init__(self, config: Config, state: StateBackend) -> None:
        self.every = config.refit.every
        self.poll_s = config.refit.poll_s
        self.store: WeightStore | None = weight_store(state) if self.every > 0 else None
        self.state = state
        self.count = 0
        self.version = 0
        self.current: FittedWeights | None = None
        #: The types the guard holds in the config last adopted (:meth:`adopt`).
        self.held: frozenset[str] = frozenset()
        #: ``time.monotonic()`` at which ``rerank`` next polls (never without a store)
        self.next_poll = 0.0 if self.store is not None else math.inf

    @property
    def curve(self) -> tuple[float, ...] | None:
        """The fitted examination curve of the record in use, if it holds one."""
        return None if self.current is None else self.current.examination

    def describe_curve(self, config: Config, stage: FeedbackStage) -> dict[str, Any]:
        """What ``stats()`` says of the reject weights: the discount, the curve in force
        (``"fitted"`` or the fixed ``"log"`` / ``"none"``), the impressions the last fit read
        and how many the fitted curve needs, and the weights of ranks 1-10."""
        record, fitted = self.current, stage.curve is not None
        return {"discount": config.learning.reject_discount,
                "curve": "fitted" if fitted else "none" if config.learning.reject_discount == "none"
                else "log",
                "impressions": 0 if record is None else record.examination_impressions,
                "needs": config.refit.reject_impressions,
                "weights": [round(w, 4) for w in stage.reject_weights(10)]}

    def due(self, outcome: FeedbackOutcome) -> bool:
        """Count a feedback that applied something; True when a re-fit is due."""
        if self.store is None or not outcome.applied:
            return False
        self.count += 1
        if self.count < self.every:
            return False
        self.count = 0
        return True

    def poll(self) -> FittedWeights | None:
        """The stored record if its version is not the one in use (then it is adopted)."""
        if self.store is None:
            return None
        self.next_poll = time.monotonic() + self.poll_s
        try:
            record = FittedWeights.from_json(self.store.read_weights())
        except StateError:  # unreachable now: rank on with the weights in use
            return None
        if record is None or record.version == self.version:
            return None
        self.version, self.current = record.version, record
        return record

    def fit(self, config: Config) -> FittedWeights | None:
        """Re-fit from ``config`` (its weights those in use) and store the record: the record
        that now applies (another process's, if it stored one first), or None."""
        if self.store is None:
            return None
        try:
            self.poll()  # start from the latest stored weights
            held: Collection[str] = self.held
            if self.current is not None:
                config, held = adopted(config, self.current, held), set(self.current.held or ())
            record = fit_weights(self.state, config, self.version + 1, held)
            return None if record is None else self.store_record(record)
        except StateError as exc:  # the feedback that made it due is stored: it stands
            logger.warning("heaprank: re-fit of the weights skipped: %s", exc)
            return None

    def adopt(self, config: Config, record: FittedWeights) -> Config:
        """``config`` ranking with ``record`` (:func:`adopted`, releasing the holds of the
        record adopted before)."""
        out = adopted(config, record, self.held)
        self.held = frozenset(record.held or ())
        return out

    def store_record(self, record: FittedWeights) -> FittedWeights | None:
        """Store ``record`` as the next version: it, or the record another process stored
        first (then adopted instead)."""
        assert self.store is not None
        record = replace(record, version=self.version + 1)
        if self.store.swap_weights(self.version, record.version, record.to_json()):
            self.version, self.current = record.version, record
            return record
        stored = self.store.read_weights()
        if record_version(stored) == record.version and stored == record.to_json():
            self.version, self.current = record.version, record  # a retried write of ours
            return record
        self.poll()
        return self.current
