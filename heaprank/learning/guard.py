"""No kind of question pays for a re-fit: the held-out check of a fit, question type by type.

A fit is checked on the later part of the log (as a whole: :mod:`.tuning`). A gain on average
can hide a loss on a minority type, so each question type with at least
:data:`MIN_TYPE_HELDOUT` held-out impressions is checked on its own, with the reciprocal rank
of its first used item under three orders: the candidate fit, the weights in force for the
type, and the first stage's (relevance alone). The type follows the fit unless it is *hurt*
against either of the other two; then it keeps the weights in force, unless those are hurt
against the first stage, and then it ranks by relevance alone. What a type keeps goes to
``qtype_weights``, held there until a later fit no longer hurts it. Types with weights of
their own (configured, or fitted per type) are not moved by the pooled fit and only reported.

*Hurt*: the mean paired difference of reciprocal ranks is below zero by more than one
standard error, or by more than :data:`LOSS_TOLERANCE`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from ..config import Config, Weights
from .choices import ChoiceLog, reciprocal_ranks, weight_names, weight_vector

__all__ = ["LOSS_TOLERANCE", "MIN_TYPE_HELDOUT", "TypeCheck", "check_types", "held_weights"]

#: A question type is judged on its own with at least this many held-out impressions.
MIN_TYPE_HELDOUT = 30
#: A mean loss of reciprocal rank beyond this holds a type back, however noisy.
LOSS_TOLERANCE = 0.01

Applies = Literal["fit", "kept", "first-stage", "own"]


@dataclass(frozen=True, slots=True)
class TypeCheck:
    """One question type on the held-out part of the log.

    Attributes:
        heldout: Its held-out impressions.
        mrr_first_stage, mrr_in_force, mrr_fit: The MRR of its first used item ordered by
            relevance alone, by the weights in force for it, and by the candidate fit.
        applies: What ranks the type after the fit: ``fit`` (the pooled weights), ``kept``
            (the weights in force, the fit hurt it), ``first-stage`` (relevance alone: both
            hurt it), ``own`` (weights of its own, which the pooled fit does not move).
    """

    heldout: int
    mrr_first_stage: float
    mrr_in_force: float
    mrr_fit: float
    applies: Applies

    @property
    def gain(self) -> float:
        """Held-out MRR of what applies over the first stage's order."""
        mrr = {"fit": self.mrr_fit, "first-stage": self.mrr_first_stage}.get(
            self.applies, self.mrr_in_force)
        return mrr - self.mrr_first_stage

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "gain": self.gain}


def hurt(candidate: np.ndarray, other: np.ndarray) -> bool:
    """Whether ``candidate``'s reciprocal ranks lose to ``other``'s beyond noise (paired)."""
    diff = candidate - other
    mean = float(diff.mean())
    se = float(diff.std(ddof=1)) / math.sqrt(len(diff)) if len(diff) > 1 else math.inf
    return mean < 0.0 and (mean + se < 0.0 or mean < -LOSS_TOLERANCE)


def first_stage(config: Config) -> Weights:
    """Weights that order by relevance alone (the first stage's order, as the log holds it)."""
    zero = {n: 0.0 for n in weight_names()}
    return Weights(**{**zero, "relevance": max(config.weights.relevance, 1e-3)})


def check_types(log: ChoiceLog, late: np.ndarray, start: Config, fit: tuple[np.ndarray, float],
                own: Collection[str]) -> dict[str, TypeCheck]:
    """Each question type of the held-out impressions ``late``, checked: ``start`` holds the
    weights in force (pooled, and per type), ``fit`` the candidate fit's weight vector and
    half-life; the types in ``own`` have weights of their own that the fit does not move."""
    relevance = weight_vector(first_stage(start))
    hl, floor = start.retention.half_life_s, start.retention.recency_floor
    out: dict[str, TypeCheck] = {}
    for code, qtype in enumerate(log.qtypes):
        mine = late[log.qtype[late] == code]
        if not len(mine):
            continue
        in_force = weight_vector(start.qtype_weights.get(qtype, start.weights))
        rr_first = reciprocal_ranks(log, mine, relevance, hl, floor)
        rr_force = reciprocal_ranks(log, mine, in_force, hl, floor)
        rr_fit = rr_force if qtype in own else reciprocal_ranks(log, mine, *fit, floor)
        out[qtype] = TypeCheck(len(mine), float(rr_first.mean()), float(rr_force.mean()),
                               float(rr_fit.mean()),
                               _applies(qtype, start, own, rr_first, rr_force, rr_fit))
    return out


def _applies(qtype: str, start: Config, own: Collection[str], rr_first: np.ndarray,
             rr_force: np.ndarray, rr_fit: np.ndarray) -> Applies:
    if qtype in own:
        return "own"
    if len(rr_fit) < MIN_TYPE_HELDOUT:  # too few to judge: what it had
        return "kept" if qtype in start.qtype_weights else "fit"
    if not hurt(rr_fit, rr_force) and not hurt(rr_fit, rr_first):
        return "fit"
    return "first-stage" if hurt(rr_force, rr_first) else "kept"


def held_weights(checks: Mapping[str, TypeCheck], start: Config) -> dict[str, Weights]:
    """The weights of each type the guard holds back (``kept`` or ``first-stage``)."""
    out = {}
    for qtype, check in checks.items():
        if check.applies == "kept":
            out[qtype] = start.qtype_weights.get(qtype, start.weights)
        elif check.applies == "first-stage":
            out[qtype] = first_stage(start)
    return out

