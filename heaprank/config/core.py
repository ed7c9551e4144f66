""":class:`Config`: the signal weights and one settings group per stage that reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from ..errors import ConfigError
from ..model.questions import QUESTION_TYPES
from ._base import Group
from ._mapping import from_mapping, regroup, to_plain
from .exploration import Exploration
from .features import Features
from .inputs import Inputs
from .learning import Learning
from .refit import Refit
from .retention import Retention
from .scoring import Scoring
from .weights import Weights

#: Each settings group of :class:`Config`, by its field name, in the pipeline's order.
GROUPS: Mapping[str, type[Group]] = {
    "inputs": Inputs, "features": Features, "scoring": Scoring, "retention": Retention,
    "learning": Learning, "refit": Refit, "exploration": Exploration,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Config(Group):
    """Everything that shapes a ranking, validated on construction: the signal weights (what
    ``tune`` and the re-fit learn), then one group of settings per stage that reads them.

    Change one setting with :func:`dataclasses.replace`:
    ``replace(cfg, refit=replace(cfg.refit, every=50))``.

    Args:
        weights: Exponent of each signal.
        qtype_weights: Signal weights for one question type (``{"when": Weights(...)}``), in
            place of ``weights`` for questions of that type.
        inputs: How candidate fields are read (:class:`~heaprank.Inputs`).
        features: What a candidate's features hold (:class:`~heaprank.Features`).
        scoring: How signals become a score (:class:`~heaprank.Scoring`).
        retention: Recency, reinforcement and forgetting (:class:`~heaprank.Retention`).
        learning: How feedback becomes link evidence (:class:`~heaprank.Learning`).
        refit: Re-fitting the weights as feedback arrives (:class:`~heaprank.Refit`).
        exploration: Thompson-sampling exploration (:class:`~heaprank.Exploration`).
    """

    _MAPPINGS: ClassVar[tuple[str, ...]] = ("qtype_weights",)

    __getstate__ = Group.getstate
    __setstate__ = Group.setstate

    weights: Weights = field(default_factory=Weights)
    qtype_weights: Mapping[str, Weights] = field(default_factory=dict)
    inputs: Inputs = field(default_factory=Inputs)
    features: Features = field(default_factory=Features)
    scoring: Scoring = field(default_factory=Scoring)
    retention: Retention = field(default_factory=Retention)
    learning: Learning = field(default_factory=Learning)
    refit: Refit = field(default_factory=Refit)
    exploration: Exploration = field(default_factory=Exploration)

    def __post_init__(self) -> None:
        if not isinstance(self.weights, Weights):
            raise ConfigError(f"weights: expected Weights, got {type(self.weights).__name__}")
        for name, kind in GROUPS.items():
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise ConfigError(f"{name}: expected {kind.__name__}, got {type(value).__name__}")
        if self.weights.association > 0 and self.learning.co_use is None:
            raise ConfigError("weights.association: > 0 needs learning.co_use=CoUse(...): "
                              "without it no co-use edges are learned or read")
        self._check_qtype_weights()
        self._freeze()

    def _check_qtype_weights(self) -> None:
        if not isinstance(self.qtype_weights, Mapping):
            raise ConfigError(f"qtype_weights: expected a mapping, got "
                              f"{type(self.qtype_weights).__name__}")
        if any(isinstance(w, Mapping) for w in self.qtype_weights.values()):
            # Weights written as mappings (a config file, to_dict's form) become Weights.
            object.__setattr__(self, "qtype_weights", {
                q: from_mapping(Weights, w, f"qtype_weights[{q!r}]") if isinstance(w, Mapping)
                else w for q, w in self.qtype_weights.items()})
        for qtype, weights in self.qtype_weights.items():
            if qtype not in QUESTION_TYPES:
                raise ConfigError(f"qtype_weights: unknown question type {qtype!r}; expected "
                                  f"one of {', '.join(QUESTION_TYPES)}")
            if not isinstance(weights, Weights):
                raise ConfigError(f"qtype_weights[{qtype!r}]: expected Weights, got "
                                  f"{type(weights).__name__}")

    def weights_for(self, qtype: str) -> Weights:
        """The signal weights for a question of type ``qtype`` (``qtype_weights`` first)."""
        return self.qtype_weights.get(qtype, self.weights)

    def with_changes(self, **changes: Any) -> Config:
        """A copy with some fields changed; a mapping given for a group changes only the
        fields it names: ``cfg.with_changes(refit={"every": 0}, weights=Weights())``.

        Raises:
            ConfigError: an unknown field of the config or of a group, or an invalid value.
        """
        mine = [f.name for f in fields(self)]
        out: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in mine:
                raise ConfigError(f"{name}: unknown field; expected one of {', '.join(mine)}")
            if name in GROUPS and isinstance(value, Mapping):
                group = getattr(self, name)
                known = [f.name for f in fields(group)]
                for key in value:
                    if key not in known:
                        raise ConfigError(f"{name}.{key}: unknown field; expected one of "
                                          f"{', '.join(known)}")
                value = replace(group, **value)
            out[name] = value
        return replace(self, **out)

    def with_weights(self, **weights: float) -> Config:
        """A copy with some weights changed: ``cfg.with_weights(recency=0)``."""
        return replace(self, weights=replace(self.weights, **weights))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """The config a :meth:`to_dict` mapping describes; fields left out keep their defaults.

        The flat shape of heaprank 0.x before the groups (``{"refit_every": 50}``) still
        reads, with a :class:`DeprecationWarning` naming each key's new place
        (``refit.every``); it will stop reading in the next release.

        Raises:
            ConfigError: an unknown key, or a value of the wrong type or out of range; the
                message names the field (``weights.usefulness``, ``refit.every``, ...).
        """
        return from_mapping(cls, regroup(data), "config")  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view in the grouped shape (for benchmarks, logs, ``--json`` and
        :func:`~heaprank.config.save_config`)."""
        out: dict[str, Any] = to_plain(self)
        return out
