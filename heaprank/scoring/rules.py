"""Rules: named multipliers in [0, 1] on the score. A multiplier of 0 drops the candidate."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._time import DAY_S
from ..errors import ConfigError
from .candidates import CandidateBatch


@dataclass(frozen=True, slots=True)
class RuleView:
    """What a rule predicate sees of a candidate."""

    id: str
    text: str
    kind: str | None
    source: str | None
    tags: frozenset[str]
    age_days: float  # NaN when the creation time is unknown
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rule:
    """``Rule("stale tool output", lambda c: c.kind == "tool_result" and c.age_days > 7, 0.5)``."""

    name: str
    predicate: Callable[[RuleView], bool]
    multiplier: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("rule name: expected a non-empty string")
        if not callable(self.predicate):
            raise ConfigError(f"rule {self.name!r}: predicate must be callable")
        m = self.multiplier
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) \
                or not 0.0 <= m <= 1.0:
            raise ConfigError(f"rule {self.name!r}: multiplier must be in [0, 1], got {m!r}")


def superseded_mask(batch: CandidateBatch) -> np.ndarray:
    """True for the older of candidates sharing a key, and for candidates whose metadata says
    ``superseded``.

    "Older" compares ``version`` when every candidate of the key has one, else ``created_at``
    for the whole key (a version number and an epoch are not on one scale, so a key where only
    some candidates carry a version is ordered by date). A candidate without the compared
    value is older than one with it. Candidates tied for the newest of their key (same
    version, or no version or date at all) are all kept: neither is known to be older, and
    picking one by input position would make the scores depend on the order the retriever
    happened to return them in.
    """
    out = batch.superseded.copy()
    if batch.keys.count(None) >= len(batch.keys) - 1:
        return out  # no two candidates share a key (the usual case: no key at all)
    keyed = [i for i, k in enumerate(batch.keys) if k is not None]
    if len(keyed) > 1:
        idx = np.array(keyed)
        _, group = np.unique(np.array([batch.keys[i] for i in keyed], dtype=object),
                             return_inverse=True)
        versions = batch.version[idx]
        unversioned = np.zeros(int(group.max()) + 1, dtype=bool)
        np.logical_or.at(unversioned, group, np.isnan(versions))
        order_key = np.where(unversioned[group], batch.created_at[idx], versions)
        order_key = np.where(np.isnan(order_key), -np.inf, order_key)
        newest = np.full(len(unversioned), -np.inf)
        np.maximum.at(newest, group, order_key)
        out[idx[order_key < newest[group]]] = True
    return out


#: The built-in rule that drops what the retention policy counts as forgotten
#: (``Config(retention=Retention(drop_forgotten=True))``).
FORGOTTEN = "forgotten"


def apply_rules(batch: CandidateBatch, rules: tuple[Rule, ...], superseded_multiplier: float,
                now: float, forgotten: np.ndarray | None = None
                ) -> tuple[np.ndarray, dict[int, list[tuple[str, float]]]]:
    """Per-candidate multiplier, and the rules that fired, for the candidates where any did.

    ``forgotten``, when given, marks the candidates the retention policy counts as forgotten:
    the ``forgotten`` rule drops them (multiplier 0).
    """
    n = len(batch)
    mult = np.empty(n)
    mult.fill(1.0)  # (np.ones: a Python wrapper of these two calls)
    fired: dict[int, list[tuple[str, float]]] = {}
    sup = superseded_mask(batch)
    if sup.any():
        mult[sup] *= superseded_multiplier
        for j in np.flatnonzero(sup).tolist():
            fired.setdefault(j, []).append(("superseded", superseded_multiplier))
    if forgotten is not None and forgotten.any():
        mult[forgotten] = 0.0
        for j in np.flatnonzero(forgotten).tolist():
            fired.setdefault(j, []).append((FORGOTTEN, 0.0))
    if rules:
        age_days = (now - batch.created_at) / DAY_S
        for i in range(n):  # user predicates are Python by nature
            cand = batch.candidate(i)
            view = RuleView(cand.id, cand.text, batch.kinds[i], batch.sources[i], batch.tags[i],
                            float(age_days[i]), cand.metadata)
            for rule in rules:
                if rule.predicate(view):
                    mult[i] *= rule.multiplier
                    fired.setdefault(i, []).append((rule.name, rule.multiplier))
    return mult, fired
