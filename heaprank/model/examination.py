"""Position propensities: how likely a reader is to examine each shown position, fitted by EM
on the feedback log with a position-based click model (PBM; Chuklin et al. 2015, the
regression-EM of Wang et al. 2018 with a categorical relevance).

The model: an item shown at rank ``r`` is used when the reader examines that rank (probability
``theta_r``) and finds the item useful (probability ``gamma_g``, one per group ``g`` of items:
the caller's choice, e.g. a question type and shape row). Only their product is seen, so
``theta`` is reported relative to rank 1 (``theta_1 = 1``): the reject weight of an ignored
item at rank ``r`` (docs/design.md, "Feedback"). Pure functions of arrays, no state.

EM, per observation ``(r, g, used)``: a used item was examined and useful; an ignored one was
examined (and useless) with probability ``theta_r (1 - gamma_g) / (1 - theta_r gamma_g)``, and
useful (but not examined) with probability ``(1 - theta_r) gamma_g / (1 - theta_r gamma_g)``;
each parameter is then the mean of its posteriors, with ``PSEUDO`` pseudo-observations at 0.5
so that no rank or group seen only used, or only ignored, sits at 0 or 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

#: Pseudo-observations (at 0.5) in each parameter's M-step.
PSEUDO = 1.0
#: A rank needs at least this many observations to be fitted; later ranks are extended from
#: the last fitted one along the log curve (:func:`reject_curve`).
MIN_SHOWN = 30
#: The least weight a fitted rank takes: an ignored item still teaches a little.
FLOOR = 0.01


class Examination(NamedTuple):
    """A fitted examination curve.

    Attributes:
        theta: ``theta_r / theta_1`` for ranks 1..len (rank 1 first), the ranks with at least
            :data:`MIN_SHOWN` observations.
        shown: Observations per rank in ``theta``.
        iterations: EM iterations run.
    """

    theta: np.ndarray
    shown: np.ndarray
    iterations: int


def fit_pbm(ranks: np.ndarray, groups: np.ndarray, used: np.ndarray, *,
            iterations: int = 200, tol: float = 1e-7) -> Examination | None:
    """Fit a position-based model to observations: ``ranks`` (from 1), ``groups`` (from 0) and
    ``used`` (bool) of each shown item with a verdict. None when it cannot say anything: no
    observation, no used item, or fewer than :data:`MIN_SHOWN` at rank 1."""
    ranks = np.asarray(ranks, dtype=np.int64)
    groups = np.asarray(groups, dtype=np.int64)
    c = np.asarray(used, dtype=bool)
    if not (ranks.shape == groups.shape == c.shape) or ranks.ndim != 1:
        raise ValueError("ranks, groups, used: expected 1-d arrays of one length")
    if len(ranks) == 0 or not c.any():
        return None
    if ranks.min() < 1 or groups.min() < 0:
        raise ValueError("ranks: expected >= 1; groups: expected >= 0")
    r0 = ranks - 1
    n_r = np.bincount(r0).astype(np.float64)
    n_g = np.bincount(groups).astype(np.float64)
    if n_r[0] < MIN_SHOWN:
        return None
    theta = np.full(len(n_r), 0.5)
    gamma = np.full(len(n_g), 0.5)
    done = 0
    while done < iterations:
        done += 1
        t, g = theta[r0], gamma[groups]
        denom = np.maximum(1.0 - t * g, 1e-12)
        examined = np.where(c, 1.0, t * (1.0 - g) / denom)
        useful = np.where(c, 1.0, (1.0 - t) * g / denom)
        new_theta = (np.bincount(r0, examined, len(n_r)) + 0.5 * PSEUDO) / (n_r + PSEUDO)
        new_gamma = (np.bincount(groups, useful, len(n_g)) + 0.5 * PSEUDO) / (n_g + PSEUDO)
        moved = max(float(np.abs(new_theta - theta).max()), float(np.abs(new_gamma - gamma).max()))
        theta, gamma = new_theta, new_gamma
        if moved < tol:
            break
    fitted = int(np.argmin(n_r >= MIN_SHOWN)) if (n_r < MIN_SHOWN).any() else len(n_r)
    rel = np.clip(theta[:fitted] / theta[0], FLOOR, 1.0)
    return Examination(rel, n_r[:fitted].astype(np.int64), done)


def log_weight(rank: int) -> float:
    """The fixed curve: ``1 / log2(1 + rank)``."""
    return 1.0 / math.log2(1.0 + rank)


def reject_curve(theta: np.ndarray | Sequence[float], upto: int) -> list[float]:
    """The reject weight of ranks 1..``upto`` from a fitted curve: its ``theta`` where fitted;
    beyond, the last fitted weight carried down the log curve (``theta_R log2(1 + R) /
    log2(1 + r)``); every weight a finite number in [:data:`FLOOR`, 1]. An empty curve is the
    log curve."""
    fitted = [min(max(float(t), FLOOR), 1.0) if math.isfinite(float(t)) else 1.0 for t in theta]
    if not fitted:
        return [log_weight(r) for r in range(1, upto + 1)]
    last, at = fitted[-1], len(fitted)
    return [fitted[r - 1] if r <= at else max(last * log_weight(r) / log_weight(at), FLOOR)
            for r in range(1, upto + 1)]
