"""The signals: each a small vectorised function returning an ``(n,)`` float64 array in (0, inf).

``score = prod_i signal_i ** w_i x rules`` is computed in log space by :func:`combine`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .._time import DAY_S
from ..model import retention as ret
from .candidates import CandidateBatch

if TYPE_CHECKING:
    from ..config import Config


def relevance(scores: np.ndarray, *, kind: str, floor: float, rank_tau: float) -> np.ndarray:
    """Normalise the retriever's scores over this candidate set into ``[floor, 1]``.

    Similarity: ``floor + (1 - floor) * (s - min) / (max - min)``; distance scores are negated
    first; all-equal scores (and a single candidate) give 1. No scores: ``1 / (1 + rank / tau)``
    with rank 0 for the first candidate. Invalid (NaN) scores, allowed only with lenient handling,
    get the floor.
    """
    s = -scores if kind == "distance" else scores
    # the ufuncs' reductions straight (what ndarray.min and max call, past their Python wrappers)
    lo, hi = float(np.minimum.reduce(s)), float(np.maximum.reduce(s))
    if lo == lo and hi == hi and math.isfinite(hi - lo):  # no NaN, no overflow: the usual case
        span = hi - lo
        if span <= 0:
            return np.ones(scores.shape[0])
        out = s - lo
        out /= span
        # Round off the last bits so that scaling or shifting every score by a constant
        # cannot reorder two candidates through floating-point noise alone.
        out.round(12, out=out)
        out *= 1.0 - floor
        out += floor
        return out if floor >= 1e-12 else np.maximum(out, 1e-12)
    return _relevance_with_nan(scores, s, floor=floor, rank_tau=rank_tau)


def _relevance_with_nan(scores: np.ndarray, s: np.ndarray, *, floor: float,
                        rank_tau: float) -> np.ndarray:
    """:func:`relevance` where a score is NaN or the scores' span overflows (``s``: the scores,
    negated for distances)."""
    n = scores.shape[0]
    nan = np.isnan(scores)
    some_nan = bool(nan.any())
    if some_nan and nan.all():
        return 1.0 / (1.0 + np.arange(n, dtype=np.float64) / rank_tau)
    valid = s[~nan] if some_nan else s
    lo, hi = float(valid.min()), float(valid.max())
    span = hi - lo  # Python floats: an overflow is inf, not a warning
    if not math.isfinite(span):  # scores so large their span overflows: rescale first
        s = s / max(abs(lo), abs(hi))
        valid = s[~nan] if some_nan else s
        lo, hi = float(valid.min()), float(valid.max())
        span = hi - lo
    if span <= 0:
        out = np.ones(n)
    else:
        out = floor + (1.0 - floor) * np.round((s - lo) / span, 12)
    if some_nan:
        out[nan] = floor if floor > 0 else 1e-6
    return np.maximum(out, 1e-12)


def recency(age_s: np.ndarray, *, half_life_s: float, floor: float) -> np.ndarray:
    """``floor + (1 - floor) * 2 ** (-age / half_life)``; unknown age (NaN) is neutral (1).

    Kept above 0 even with ``floor=0`` (where ``2 ** -x`` underflows past ~1075 half-lives), so
    an old memory is weak, never dropped: only a rule may zero a score.
    """
    # In place, op for op the formula above (the same bits: x / -h is -(x / h) exactly); NaN
    # ages stay NaN until the end, the only way the sum of values in (0, 1] is NaN.
    out = np.maximum(age_s, 0.0)
    out /= -half_life_s
    np.exp2(out, out=out)
    out *= 1.0 - floor
    out += floor
    if floor < 1e-300:
        np.maximum(out, 1e-300, out=out)
    if math.isnan(np.add.reduce(out)):
        out[np.isnan(out)] = 1.0
    return out


def reinforcement(use_count: np.ndarray, *, cap: float) -> np.ndarray:
    """HEBBS reinforcement from *used* counts: ``1 + log2(1 + min(uses, cap)) / log2(1 + cap)``.

    1 for a document never used, 2 from ``cap`` uses on: the first uses count most and no
    document outgrows the cap, so reinforcement can break ties but never runs away.
    """
    uses = np.minimum(np.maximum(use_count, 0.0), cap)
    return 1.0 + np.log2(1.0 + uses) / math.log2(1.0 + cap)
#: HEBBS scores importance on [0, 1] with 0.5 the default; heaprank's dose has 1 as neutral. So a
#: dose is twice the seed's value: the formula is applied on the seed's scale and read back.
SEED_SCALE = 2.0
#: The top of the seed's importance scale (1.0 there), as a dose: the frequency boost can lift an
#: aggregated memory up to it, never beyond.
MAX_AGGREGATED = 1.0 * SEED_SCALE
#: Kept above 0 (only a rule may zero a score): the least an aggregated memory can weigh.
MIN_AGGREGATED = 0.05


def importance(batch: CandidateBatch, kind_importance: Mapping[str, float]) -> np.ndarray:
    """The explicit dose, else the kind prior (1.0 for unknown kinds).

    Aggregated memories (``source_count`` given: insights, summaries) follow HEBBS's insight
    formula on its own [0, 1] scale, where 0.5 is the default importance and a dose ``d`` is
    ``d / 2``::

        seed = 0.7 x mean source importance + 0.3 x confidence + ln(1 + source_count) / 10

    clamped to [0, 1], and read back as the dose ``2 x seed`` (at least 0.05). The mean source
    importance is the explicit ``importance`` (a dose), else the seed's default 0.5 (dose 1): the
    kind prior describes the aggregate, not its sources. Confidence defaults to 0.5. So with
    neutral inputs an aggregated memory is neutral plus its frequency boost
    (``ln(1 + n) / 5`` as a dose: +0.14 for one source, +0.69 for 30), and no boost lifts it
    past a dose of 2, the top of the seed's scale.
    """
    # kinds are None or non-empty: None is not a kind, so it reads the neutral 1.0
    prior = np.fromiter(map(kind_importance.get, batch.kinds,  # type: ignore[arg-type]
                            itertools.repeat(1.0)),
                        dtype=np.float64, count=len(batch))
    # fmax ignores NaN: its reduction is NaN only when every value is (the field is absent,
    # which the batch tells without a look when no candidate gave it)
    if (batch.absent("importance") or np.isnan(np.fmax.reduce(batch.importance))) and (
            batch.absent("source_count") or np.isnan(np.fmax.reduce(batch.source_count))):
        return prior  # no explicit dose, no aggregate: the kind priors (the usual case)
    explicit = ~np.isnan(batch.importance)
    base = np.where(explicit, batch.importance, prior)
    aggregated = ~np.isnan(batch.source_count)
    if aggregated.any():
        sources = np.where(explicit, batch.importance, 1.0) / SEED_SCALE
        conf = np.where(np.isnan(batch.confidence), 0.5, batch.confidence)
        seed = 0.7 * sources + 0.3 * conf + np.log1p(np.nan_to_num(batch.source_count)) / 10.0
        dose = np.clip(seed, 0.0, 1.0) * SEED_SCALE
        base = np.where(aggregated, np.maximum(dose, MIN_AGGREGATED), base)
    return base


@dataclass(frozen=True, slots=True)
class UsageSignals:
    """What time and use give one rerank: recency (by the configured kernel), reinforcement,
    the candidates the retention policy counts as forgotten (when a rule drops them), and the
    extra columns an impression records because they changed the scores."""

    recency: np.ndarray
    reinforcement: np.ndarray | float  # 1.0 (for every candidate) when its weight is 0
    forgotten: np.ndarray | None = None
    stability_days: np.ndarray | None = None
    stored: dict[str, np.ndarray] = field(default_factory=dict)

    def notes(self, i: int, use_count: float, cap: float) -> dict[str, str]:
        """EXPLAIN additions for candidate ``i``: the stability behind an Ebbinghaus recency,
        the use count behind reinforcement."""
        out = {}
        if "reinforcement" in self.stored:
            out["reinforcement"] = f"used {use_count:g}x, cap {cap:g}"
        if self.stability_days is not None:
            out["recency"] = f"ebbinghaus S {self.stability_days[i]:.0f}d"
        return out


def usage_signals(cfg: Config, namespace: str, age_s: np.ndarray, importance: np.ndarray,
                  use_count: np.ndarray) -> UsageSignals:
    """Recency, reinforcement and the forgotten mask of one rerank (docs/design.md, "Retention
    and forgetting"). The retention policy is read only when the kernel or the rule needs it."""
    stored: dict[str, np.ndarray] = {}
    reinforced: np.ndarray | float = 1.0
    if cfg.weights.reinforcement > 0:
        reinforced = stored["reinforcement"] = reinforcement(use_count, cap=cfg.retention.reinforcement_cap)
    ebbinghaus = cfg.retention.recency_kernel == "ebbinghaus"
    forgotten = stability = None
    if ebbinghaus or cfg.retention.drop_forgotten:
        policy = ret.resolve_policy(cfg.retention.policy).for_namespace(namespace)
        if cfg.retention.drop_forgotten:
            forgotten = ret.forgotten(age_s / DAY_S, importance, use_count, policy)
    if ebbinghaus:
        rec = stored["recency"] = ret.ebbinghaus_recency(age_s, importance, use_count, policy,
                                                         floor=cfg.retention.recency_floor)
        stability = ret.stability_days(importance, use_count, policy)
    else:
        rec = recency(age_s, half_life_s=cfg.retention.half_life_s, floor=cfg.retention.recency_floor)
    return UsageSignals(rec, reinforced, forgotten, stability, stored)
