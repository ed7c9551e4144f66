"""The scoring stage's settings: how relevance, importance, fusion and rules become a score."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Literal

from ..errors import ConfigError
from ..model.questions import INTENTS
from ._base import Group, check_choice, check_fraction, check_mapping, check_positive, check_weight

#: Importance dose by memory kind when a candidate gives none (1.0 is neutral).
DEFAULT_KIND_IMPORTANCE: Mapping[str, float] = MappingProxyType({
    "instruction": 1.5, "preference": 1.3, "decision": 1.3, "error": 1.25, "summary": 1.2,
    "insight": 1.2, "fact": 1.0, "note": 1.0, "episode": 0.8, "tool_result": 0.6,
})
#: Recency where the question asks for it ("the latest", "still", "now"), nowhere else: with no
#: feedback and no explicit importance or rule, heaprank then keeps the retriever's order.
DEFAULT_INTENT_RECENCY: Mapping[str, float] = MappingProxyType({"past": 0.0, "none": 0.0})
#: ``Scoring(intent_recency=RECENCY_EVERY_QUESTION)``: recency on every question, whatever its
#: intent (the default before issue 24).
RECENCY_EVERY_QUESTION: Mapping[str, float] = MappingProxyType({"past": 1.0, "none": 1.0})


@dataclass(frozen=True, slots=True, kw_only=True)
class Scoring(Group):
    """How the scorer turns a candidate's signals into its score (``Config.scoring``).

    Args:
        score_kind: ``"similarity"`` (higher is better) or ``"distance"`` (lower is better).
        relevance_floor: Relevance of the weakest candidate, in [0, 1); kept above 0 so
            learning can still rescue a weak text match.
        rank_tau: With no retriever scores, relevance is ``1 / (1 + rank / rank_tau)``.
        kind_importance: Importance dose per ``kind`` when a candidate gives none.
        superseded_multiplier: Rule multiplier for the older of two candidates with one key.
        intent_recency: Multiplier of the recency weight per temporal intent of the question
            (``"recent"``: "latest", "now", "still"; ``"past"``: "in 2019", "last summer";
            ``"none"``: neither); a negative value favours older memories. An intent the
            mapping does not name takes its default, :data:`DEFAULT_INTENT_RECENCY` (past 0,
            none 0; recent keeps the weight): recency applies only to questions that ask for
            the current state, so that with no feedback the retriever's order is kept
            (docs/design.md, "Day one"); :data:`RECENCY_EVERY_QUESTION` ranks every question by
            recency. Tune the values on your data (RESULTS.md gives the ones chosen on
            LoCoMo's dev split).
        fusion_weights: Weight of each named retriever score a candidate carries in
            ``metadata.retriever_scores`` (e.g. ``{"dense": 1.0}``), relative to its ``score``
            (weight 1): relevance becomes the weighted mean of the min-max normalised scores.
    """

    GROUP: ClassVar[str] = "scoring"
    _MAPPINGS: ClassVar[tuple[str, ...]] = ("kind_importance", "intent_recency", "fusion_weights")

    __getstate__ = Group.getstate
    __setstate__ = Group.setstate

    score_kind: Literal["similarity", "distance"] = "similarity"
    relevance_floor: float = 0.02
    rank_tau: float = 5.0
    kind_importance: Mapping[str, float] = field(default_factory=lambda: DEFAULT_KIND_IMPORTANCE)
    superseded_multiplier: float = 0.1
    intent_recency: Mapping[str, float] = field(default_factory=dict)
    fusion_weights: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice(self._at("score_kind"), self.score_kind, ("similarity", "distance"))
        check_fraction(self._at("relevance_floor"), self.relevance_floor, closed=False)
        check_positive(self._at("rank_tau"), self.rank_tau)
        check_fraction(self._at("superseded_multiplier"), self.superseded_multiplier, closed=True)
        for name in self._MAPPINGS:
            check_mapping(self._at(name), getattr(self, name))
        for kind, dose in self.kind_importance.items():
            check_positive(self._at(f"kind_importance[{kind!r}]"), dose)
        for intent, scale in self.intent_recency.items():
            if intent not in INTENTS:
                raise ConfigError(f"{self._at('intent_recency')}: unknown intent {intent!r}; "
                                  f"expected 'recent', 'past' or 'none'")
            check_weight(self._at(f"intent_recency[{intent!r}]"), scale, signed=True)
        # Each intent not named takes its default (so {"past": -8} keeps recency off where a
        # question has no temporal intent).
        object.__setattr__(self, "intent_recency",
                           {**DEFAULT_INTENT_RECENCY, **self.intent_recency})
        for name, weight in self.fusion_weights.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{self._at('fusion_weights')}: score names must be non-empty "
                                  f"str, got {name!r}")
            check_weight(self._at(f"fusion_weights[{name!r}]"), weight)
        self._freeze()
