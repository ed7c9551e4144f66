"""Typed, validated configuration: signal weights (exponents) and the knobs of each signal."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Literal

from .errors import ConfigError
from .features import INTENTS, QUESTION_TYPES
from .links import Prior

DAY_S = 86_400.0

#: Importance dose by memory kind when a candidate gives none (1.0 is neutral).
DEFAULT_KIND_IMPORTANCE: Mapping[str, float] = MappingProxyType({
    "instruction": 1.5, "preference": 1.3, "decision": 1.3, "error": 1.25, "summary": 1.2,
    "insight": 1.2, "fact": 1.0, "note": 1.0, "episode": 0.8, "tool_result": 0.6,
})

SIGNALS = ("relevance", "recency", "importance", "usefulness")
#: Config fields held as read-only mappings.
_MAPPINGS = ("kind_importance", "intent_recency", "fusion_weights", "qtype_weights")


def _check_nonneg(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}: expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name}: must be finite and >= 0, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Weights:
    """Exponents of the log-linear score ``prod_i signal_i ** w_i``; 0 switches a signal off."""

    relevance: float = 1.0
    recency: float = 1.0
    importance: float = 1.0
    usefulness: float = 1.5

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_nonneg(f"weights.{f.name}", getattr(self, f.name))

    def as_tuple(self) -> tuple[float, ...]:
        return tuple(float(getattr(self, name)) for name in SIGNALS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """Everything that shapes a ranking, validated on construction.

    Args:
        weights: Exponent of each signal.
        score_kind: ``"similarity"`` (higher is better) or ``"distance"`` (lower is better).
        relevance_floor: Relevance of the weakest candidate, in [0, 1); kept above 0 so
            learning can still rescue a weak text match.
        rank_tau: With no retriever scores, relevance is ``1 / (1 + rank / rank_tau)``.
        half_life_s: Recency half-life on time since last use (creation until first use).
        recency_floor: Recency never drops below this.
        kind_importance: Importance dose per ``kind`` when a candidate gives none.
        prior: Beta prior of every link and how much a namespace borrows from the pool.
        em_credit: EM credit ``p_f / U`` for used items (else uniform ``1 / n_features``).
        reject_discount: ``"none"``, or ``"log"``: an ignored item at rank r adds
            ``1 / log2(1 + r)`` negative evidence instead of 1.
        doc_features: Add ``doc:<id>`` to every candidate's features.
        tag_slots: Tags that become ``tag:<name>=yes|no`` slots.
        superseded_multiplier: Rule multiplier for the older of two candidates with one key.
        on_invalid: ``"raise"`` on bad candidate fields, or ``"neutral"``: neutral signal, flagged.
        future_tolerance_s: Times up to this far in the future count as now (clock skew).
        feature_prefix_chars: Only this many leading characters of a text are featurised, so
            a candidate's cost does not grow with its size (the length bucket tops out far
            below it).
        speaker_roles: Add the ``person:<first|second|third>/<user|assistant|other>`` slot:
            the question's grammatical person crossed with the candidate's source role, so
            links learn which questions ask about the user's and which about the assistant's
            own statements.
        intent_recency: Multiplier of the recency weight per temporal intent of the question
            (``"recent"``: "latest", "now", "still"; ``"past"``: "in 2019", "last summer");
            a negative value favours older memories. Missing intents keep the weight. Tune
            the values on your data (RESULTS.md gives the ones chosen on LoCoMo's dev split).
        fusion_weights: Weight of each named retriever score a candidate carries in
            ``metadata.retriever_scores`` (e.g. ``{"dense": 1.0}``), relative to its ``score``
            (weight 1): relevance becomes the weighted mean of the min-max normalised scores.
        qtype_weights: Signal weights for one question type (``{"when": Weights(...)}``), in
            place of ``weights`` for questions of that type.
    """

    weights: Weights = field(default_factory=Weights)
    score_kind: Literal["similarity", "distance"] = "similarity"
    relevance_floor: float = 0.02
    rank_tau: float = 5.0
    half_life_s: float = 30 * DAY_S
    recency_floor: float = 0.9
    kind_importance: Mapping[str, float] = field(default_factory=lambda: DEFAULT_KIND_IMPORTANCE)
    prior: Prior = field(default_factory=Prior)
    em_credit: bool = True
    reject_discount: Literal["none", "log"] = "log"
    doc_features: bool = False
    tag_slots: tuple[str, ...] = ()
    superseded_multiplier: float = 0.1
    on_invalid: Literal["raise", "neutral"] = "raise"
    future_tolerance_s: float = 300.0
    feature_prefix_chars: int = 2000
    speaker_roles: bool = False
    intent_recency: Mapping[str, float] = field(default_factory=dict)
    fusion_weights: Mapping[str, float] = field(default_factory=dict)
    qtype_weights: Mapping[str, Weights] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.weights, Weights):
            raise ConfigError(f"weights: expected Weights, got {type(self.weights).__name__}")
        if not isinstance(self.prior, Prior):
            raise ConfigError(f"prior: expected Prior, got {type(self.prior).__name__}")
        if self.score_kind not in ("similarity", "distance"):
            raise ConfigError(f"score_kind: expected 'similarity' or 'distance', got {self.score_kind!r}")
        if self.reject_discount not in ("none", "log"):
            raise ConfigError(f"reject_discount: expected 'none' or 'log', got {self.reject_discount!r}")
        if self.on_invalid not in ("raise", "neutral"):
            raise ConfigError(f"on_invalid: expected 'raise' or 'neutral', got {self.on_invalid!r}")
        for name in ("relevance_floor", "recency_floor"):
            value = getattr(self, name)
            _check_nonneg(name, value)
            if value >= 1.0:
                raise ConfigError(f"{name}: must be in [0, 1), got {value!r}")
        for name in ("rank_tau", "half_life_s"):
            value = getattr(self, name)
            _check_nonneg(name, value)
            if value == 0:
                raise ConfigError(f"{name}: must be > 0")
        _check_nonneg("future_tolerance_s", self.future_tolerance_s)
        if isinstance(self.feature_prefix_chars, bool) or not isinstance(self.feature_prefix_chars, int) \
                or self.feature_prefix_chars < 100:
            raise ConfigError(f"feature_prefix_chars: must be an int >= 100, got "
                              f"{self.feature_prefix_chars!r}")
        _check_nonneg("superseded_multiplier", self.superseded_multiplier)
        if self.superseded_multiplier > 1:
            raise ConfigError("superseded_multiplier: must be in [0, 1]")
        for kind, dose in self.kind_importance.items():
            _check_nonneg(f"kind_importance[{kind!r}]", dose)
            if dose == 0:
                raise ConfigError(f"kind_importance[{kind!r}]: must be > 0")
        if isinstance(self.tag_slots, str) or not all(isinstance(t, str) for t in self.tag_slots):
            raise ConfigError("tag_slots: expected a tuple of tag names")
        object.__setattr__(self, "tag_slots", tuple(self.tag_slots))
        if not isinstance(self.speaker_roles, bool):
            raise ConfigError(f"speaker_roles: expected a bool, got "
                              f"{type(self.speaker_roles).__name__}")
        self._check_quality_maps()
        self._freeze()

    def _check_quality_maps(self) -> None:
        for name in ("intent_recency", "fusion_weights", "qtype_weights"):
            if not isinstance(getattr(self, name), Mapping):
                raise ConfigError(f"{name}: expected a mapping, got "
                                  f"{type(getattr(self, name)).__name__}")
        for intent, scale in self.intent_recency.items():
            if intent not in INTENTS[:-1]:
                raise ConfigError(f"intent_recency: unknown intent {intent!r}; expected "
                                  f"'recent' or 'past'")
            if isinstance(scale, bool) or not isinstance(scale, (int, float)) \
                    or not math.isfinite(scale):
                raise ConfigError(f"intent_recency[{intent!r}]: expected a finite number, got "
                                  f"{scale!r}")
        for name, weight in self.fusion_weights.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"fusion_weights: score names must be non-empty str, got "
                                  f"{name!r}")
            _check_nonneg(f"fusion_weights[{name!r}]", weight)
        for qtype, weights in self.qtype_weights.items():
            if qtype not in QUESTION_TYPES:
                raise ConfigError(f"qtype_weights: unknown question type {qtype!r}; expected "
                                  f"one of {', '.join(QUESTION_TYPES)}")
            if not isinstance(weights, Weights):
                raise ConfigError(f"qtype_weights[{qtype!r}]: expected Weights, got "
                                  f"{type(weights).__name__}")

    def _freeze(self) -> None:
        for name in _MAPPINGS:
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def weights_for(self, qtype: str) -> Weights:
        """The signal weights for a question of type ``qtype`` (``qtype_weights`` first)."""
        return self.qtype_weights.get(qtype, self.weights)

    def __getstate__(self) -> list[Any]:
        # A read-only mapping does not pickle: send a plain dict, freeze it again on arrival.
        return [dict(v) if isinstance(v, MappingProxyType) else v
                for v in (getattr(self, f.name) for f in fields(self))]

    def __setstate__(self, state: list[Any]) -> None:
        for f, value in zip(fields(self), state):
            object.__setattr__(self, f.name, value)
        self._freeze()

    def with_weights(self, **weights: float) -> Config:
        """A copy with some weights changed: ``cfg.with_weights(recency=0)``."""
        return replace(self, weights=replace(self.weights, **weights))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for benchmarks, logs and ``--json``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (Weights, Prior)):
                value = {g.name: getattr(value, g.name) for g in fields(value)}
            elif isinstance(value, Mapping):
                value = {k: ({g.name: getattr(v, g.name) for g in fields(v)}
                             if isinstance(v, Weights) else v) for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out
