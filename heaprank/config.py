"""Typed, validated configuration: signal weights (exponents) and the knobs of each signal."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, make_dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ._time import DAY_S
from .errors import ConfigError
from .model.co_use import CoUse
from .model.links import Prior
from .model.privacy import DEFAULT_MIN_NAMESPACES, check_min_namespaces
from .model.questions import INTENTS, QUESTION_TYPES
from .model.retention import PolicySet, RetentionPolicy, parse_policy
from .model.signals import NAMES
from .model.signals import SIGNALS as SIGNAL_DECLARED

#: Importance dose by memory kind when a candidate gives none (1.0 is neutral).
DEFAULT_KIND_IMPORTANCE: Mapping[str, float] = MappingProxyType({
    "instruction": 1.5, "preference": 1.3, "decision": 1.3, "error": 1.25, "summary": 1.2,
    "insight": 1.2, "fact": 1.0, "note": 1.0, "episode": 0.8, "tool_result": 0.6,
})

#: The signals' names, in the order of the score's columns (declared in heaprank/model/signals.py).
SIGNALS = NAMES
#: Config fields held as read-only mappings.
#: Recency where the question asks for it ("the latest", "still", "now"), nowhere else: with no
#: feedback and no explicit importance or rule, heaprank then keeps the retriever's order.
DEFAULT_INTENT_RECENCY: Mapping[str, float] = MappingProxyType({"past": 0.0, "none": 0.0})
#: ``Config(intent_recency=RECENCY_EVERY_QUESTION)``: recency on every question, whatever its
#: intent (the default before issue 24).
RECENCY_EVERY_QUESTION: Mapping[str, float] = MappingProxyType({"past": 1.0, "none": 1.0})
_MAPPINGS = ("kind_importance", "intent_recency", "fusion_weights", "qtype_weights")

RECENCY_KERNELS = ("exponential", "ebbinghaus")


#: Largest signal weight (an exponent) or fusion weight accepted, and largest magnitude of an
#: ``intent_recency`` multiplier: at 100 a signal of 0.99 already weighs 0.37, and far larger
#: exponents push every score to 0.0 (ties) or overflow the log score. Fitted weights stay
#: far below (a re-fit caps them at 20).
MAX_WEIGHT = 100.0


def _number(name: str, value: object, rule: str) -> float:
    """``value`` as a finite float, else the ConfigError naming ``name`` and its ``rule``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}: expected a number, got {type(value).__name__}")
    try:
        out = float(value)
    except OverflowError:  # an int beyond the float range
        raise ConfigError(f"{name}: {rule}, got an integer too large for a float") from None
    if not math.isfinite(out):
        raise ConfigError(f"{name}: {rule}, got {value!r}")
    return out


def _check_nonneg(name: str, value: float) -> None:
    if _number(name, value, "must be finite and >= 0") < 0:
        raise ConfigError(f"{name}: must be finite and >= 0, got {value!r}")


def _check_weights(self: Any) -> None:
    for f in fields(self):
        _check_weight(f"weights.{f.name}", getattr(self, f.name))


def _check_weight(name: str, value: float, *, signed: bool = False) -> None:
    """A weight: finite, from 0 (``-MAX_WEIGHT`` when ``signed``) to :data:`MAX_WEIGHT`."""
    rule = f"must be finite and in [-{MAX_WEIGHT:g}, {MAX_WEIGHT:g}]" if signed \
        else "must be finite and >= 0"
    out = _number(name, value, rule)
    if out < (-MAX_WEIGHT if signed else 0.0):
        raise ConfigError(f"{name}: {rule}, got {value!r}")
    if out > MAX_WEIGHT:
        raise ConfigError(f"{name}: must be at most {MAX_WEIGHT:g}, got {value!r}")


def _as_tuple(self: Any) -> tuple[float, ...]:
    """The weights in :data:`SIGNALS` order."""
    return tuple(float(getattr(self, name)) for name in SIGNALS)


_WEIGHTS_DOC = ("Exponents of the log-linear score ``prod_i signal_i ** w_i``; 0 switches a "
                "signal off. Each is a finite number from 0 to :data:`MAX_WEIGHT` (100)."
                "\n\nOne field per signal of :data:`heaprank.model.signals.SIGNALS`, "
                "its default there:\n\n" + "\n".join(
                    f"- ``{s.name}`` (default {s.weight:g}): {s.doc}." for s in SIGNAL_DECLARED))

if TYPE_CHECKING:
    @dataclass(frozen=True, init=False)
    class Weights:
        """Exponents of the log-linear score, one keyword per declared signal."""

        def __init__(self, **weights: float) -> None: ...
        def __getattr__(self, name: str) -> float: ...
        def as_tuple(self) -> tuple[float, ...]: ...
else:
    # Built from the declaration (heaprank/model/signals.py), so that a new signal is a weight
    # without an edit here: a frozen, keyword-only dataclass with one float field per signal.
    Weights = make_dataclass(
        "Weights", [(s.name, float, field(default=s.weight)) for s in SIGNAL_DECLARED],
        namespace={"__post_init__": _check_weights, "as_tuple": _as_tuple,
                   "__doc__": _WEIGHTS_DOC, "__module__": __name__},
        frozen=True, slots=True, kw_only=True)


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
        reject_discount: An ignored item at rank r adds 1 (``"none"``), ``1 / log2(1 + r)`` (``"log"``)
            or rank r's odds of being examined vs rank 1, fitted on the log at each re-fit (``"fitted"``).
        doc_features: Add ``doc:<id>`` to every candidate's features.
        tag_slots: Tags that become ``tag:<name>=yes|no`` slots.
        superseded_multiplier: Rule multiplier for the older of two candidates with one key.
        on_invalid: ``"raise"`` on bad candidate fields, or ``"neutral"``: neutral signal, flagged.
        future_tolerance_s: Times up to this far in the future count as now (clock skew).
        feature_prefix_chars: Only this many leading characters of a text are featurised, so
            a candidate's cost does not grow with its size (the length bucket tops out far
            below it).
        reinforcement_cap: Use count at which the reinforcement signal stops growing (it is
            ``1 + log2(1 + min(uses, cap)) / log2(1 + cap)``, in [1, 2]).
        recency_kernel: ``"exponential"``: ``2 ** (-age / half_life_s)``; ``"ebbinghaus"``: the
            retention ``exp(-idle_days / S)`` of the namespace's retention policy, ``S``
            lengthened by importance and use count. Both are lifted by ``recency_floor``.
        retention_policy: The forget policy: ``None`` (built-in defaults), a
            :class:`~heaprank.model.retention.RetentionPolicy` or
            :class:`~heaprank.model.retention.PolicySet` (a mapping in the policy file's form, as
            config files hold it, becomes one), or the path of a TOML or JSON policy file
            (re-read when it changes).
        drop_forgotten: Drop candidates the retention policy counts as forgotten from rankings
            (the ``forgotten`` rule, multiplier 0).
        exploration_rate: Share of reranks that explore: usefulness comes from a Thompson
            sample of each link's Beta posterior instead of its mean (0: never).
        exploration_seed: Seed of the reranker's exploration draws (read when the reranker is
            built; ``None``: fresh entropy).
        co_use: Learn co-use edges between documents used together, and spread activation
            along them when ``weights.association > 0`` (:class:`~heaprank.CoUse`); ``None``
            (the default) stores no edges.
        speaker_roles: Add the ``person:<first|second|third>/<user|assistant|other>`` slot:
            the question's grammatical person crossed with the candidate's source role, so
            links learn which questions ask about the user's and which about the assistant's
            own statements.
        intent_recency: Multiplier of the recency weight per temporal intent of the question
            (``"recent"``: "latest", "now", "still"; ``"past"``: "in 2019", "last summer";
            ``"none"``: neither); a negative value favours older memories. An intent the
            mapping does not name takes its default, :data:`DEFAULT_INTENT_RECENCY` (past 0,
            none 0; recent keeps the weight): recency applies only to questions that ask for
            the current state, so that with no feedback the retriever's order is kept
            (docs/design.md, "Day one"); :data:`RECENCY_EVERY_QUESTION` ranks every question by
            recency. Tune the values on your data (RESULTS.md gives the ones chosen on
            LoCoMo's dev split).
        stage_slots: Add the ``rank:`` and ``gap:`` slots: the candidate's rank in the
            retriever's order and its score gap to the retriever's top, so links learn how
            often the first stage's choice is right for which questions. Off by default: on
            LoCoMo's development split they gain on a learned ranker (LambdaRank, +0.023 MRR
            after feedback) and cost on BM25, fusion and RRF (-0.014 to -0.040), since
            usefulness then holds the first stage's top in place (RESULTS.md).
        fusion_weights: Weight of each named retriever score a candidate carries in
            ``metadata.retriever_scores`` (e.g. ``{"dense": 1.0}``), relative to its ``score``
            (weight 1): relevance becomes the weighted mean of the min-max normalised scores.
        qtype_weights: Signal weights for one question type (``{"when": Weights(...)}``), in
            place of ``weights`` for questions of that type.
        refit_every: Re-fit ``weights`` from the state's impression log after every this many
            feedbacks given through a reranker (``tune``'s fit and held-out check, shrunk
            toward the current weights); the weights live in the state, so every reranker
            sharing it ranks with the latest. 0: never, and ``weights`` stay as given.
        refit_shrinkage: The L2 pull of each re-fit toward the current weights.
        refit_window: A re-fit reads the latest this many impressions with feedback (its
            cost grows with them: ``python -m benchmarks refit-cost``).
        refit_poll_s: How often (seconds) a reranker looks for weights another process fitted.
        refit_signals: The weights a re-fit may move (``None``: every weight the log carries;
            the others stay as configured).
        refit_qtypes: Each re-fit also fits each question type's weights (its impressions
            only, pulled toward the pooled fit) into ``qtype_weights``, where its own held-out
            check lets it move.
        pooled_min_namespaces: A feature holding a caller's value (a kind, source or tag outside
            the codebook) borrows pooled counts only once this many namespaces hold it (>= 1;
            1: always): ``heaprank.model.privacy``, docs/tenancy.md.
        reject_fit_impressions: ``"fitted"`` keeps the log curve below this many impressions with feedback.
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
    reject_discount: Literal["none", "log", "fitted"] = "log"
    doc_features: bool = False
    tag_slots: tuple[str, ...] = ()
    superseded_multiplier: float = 0.1
    on_invalid: Literal["raise", "neutral"] = "raise"
    future_tolerance_s: float = 300.0
    feature_prefix_chars: int = 2000
    reinforcement_cap: float = 100.0
    recency_kernel: Literal["exponential", "ebbinghaus"] = "exponential"
    retention_policy: str | os.PathLike[str] | PolicySet | RetentionPolicy | None = None
    drop_forgotten: bool = False
    exploration_rate: float = 0.0
    exploration_seed: int | None = None
    co_use: CoUse | None = None
    speaker_roles: bool = False
    intent_recency: Mapping[str, float] = field(default_factory=dict)
    stage_slots: bool = False
    fusion_weights: Mapping[str, float] = field(default_factory=dict)
    qtype_weights: Mapping[str, Weights] = field(default_factory=dict)
    refit_every: int = 100
    refit_shrinkage: float = 1.0
    refit_window: int = 5000
    refit_poll_s: float = 5.0
    refit_signals: tuple[str, ...] | None = None
    refit_qtypes: bool = False
    pooled_min_namespaces: int = DEFAULT_MIN_NAMESPACES
    reject_fit_impressions: int = 500

    def __post_init__(self) -> None:
        if not isinstance(self.weights, Weights):
            raise ConfigError(f"weights: expected Weights, got {type(self.weights).__name__}")
        if self.co_use is not None and not isinstance(self.co_use, CoUse):
            raise ConfigError(f"co_use: expected CoUse or None, got {type(self.co_use).__name__}")
        if self.weights.association > 0 and self.co_use is None:
            raise ConfigError("weights.association: > 0 needs co_use=CoUse(...): without it no "
                              "co-use edges are learned or read")
        if not isinstance(self.prior, Prior):
            raise ConfigError(f"prior: expected Prior, got {type(self.prior).__name__}")
        if self.score_kind not in ("similarity", "distance"):
            raise ConfigError(f"score_kind: expected 'similarity' or 'distance', got {self.score_kind!r}")
        if self.reject_discount not in ("none", "log", "fitted"):
            raise ConfigError(f"reject_discount: expected none, log or fitted, got {self.reject_discount!r}")
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
        for name in ("stage_slots", "speaker_roles", "drop_forgotten", "refit_qtypes"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected a bool, got {type(getattr(self, name)).__name__}")
        self._check_quality_maps()
        self._freeze()
        self._check_seed_signals()
        check_min_namespaces("pooled_min_namespaces", self.pooled_min_namespaces)

    def _check_seed_signals(self) -> None:
        _check_nonneg("reinforcement_cap", self.reinforcement_cap)
        if self.reinforcement_cap < 1:
            raise ConfigError(f"reinforcement_cap: must be >= 1, got {self.reinforcement_cap!r}")
        if self.recency_kernel not in RECENCY_KERNELS:
            raise ConfigError(f"recency_kernel: expected 'exponential' or 'ebbinghaus', got "
                              f"{self.recency_kernel!r}")
        policy = self.retention_policy
        if isinstance(policy, Mapping):  # a policy written inline, as to_dict writes it
            policy = parse_policy(policy, "retention_policy")
            object.__setattr__(self, "retention_policy", policy)
        if not (policy is None or isinstance(policy, (str, os.PathLike, PolicySet,
                                                      RetentionPolicy))):
            raise ConfigError(f"retention_policy: expected a file path, a RetentionPolicy or a "
                              f"PolicySet, got {type(policy).__name__}")
        for name, low in (("refit_every", 0), ("refit_window", 1), ("reject_fit_impressions", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name}: expected an int >= {low}, got {value!r}")
        _check_nonneg("refit_shrinkage", self.refit_shrinkage)
        _check_nonneg("refit_poll_s", self.refit_poll_s)
        if self.refit_signals is not None:
            if isinstance(self.refit_signals, str) or any(n not in SIGNALS
                                                          for n in self.refit_signals):
                raise ConfigError(f"refit_signals: expected None or signal names of "
                                  f"{', '.join(SIGNALS)}, got {self.refit_signals!r}")
            object.__setattr__(self, "refit_signals", tuple(self.refit_signals))
        _check_nonneg("exploration_rate", self.exploration_rate)
        if self.exploration_rate > 1:
            raise ConfigError(f"exploration_rate: must be in [0, 1], got {self.exploration_rate!r}")
        seed = self.exploration_seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ConfigError(f"exploration_seed: expected None or an int >= 0, got {seed!r}")

    def _check_quality_maps(self) -> None:
        for name in ("intent_recency", "fusion_weights", "qtype_weights"):
            if not isinstance(getattr(self, name), Mapping):
                raise ConfigError(f"{name}: expected a mapping, got "
                                  f"{type(getattr(self, name)).__name__}")
        for intent, scale in self.intent_recency.items():
            if intent not in INTENTS:
                raise ConfigError(f"intent_recency: unknown intent {intent!r}; expected "
                                  f"'recent', 'past' or 'none'")
            _check_weight(f"intent_recency[{intent!r}]", scale, signed=True)
        # Each intent not named takes its default (so {"past": -8} keeps recency off where a
        # question has no temporal intent).
        object.__setattr__(self, "intent_recency",
                           {**DEFAULT_INTENT_RECENCY, **self.intent_recency})
        for name, weight in self.fusion_weights.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"fusion_weights: score names must be non-empty str, got "
                                  f"{name!r}")
            _check_weight(f"fusion_weights[{name!r}]", weight)
        if any(isinstance(w, Mapping) for w in self.qtype_weights.values()):
            # Weights written as mappings (a config file, to_dict's form) become Weights.
            object.__setattr__(self, "qtype_weights", {
                q: _from_mapping(Weights, w, f"qtype_weights[{q!r}]") if isinstance(w, Mapping)
                else w for q, w in self.qtype_weights.items()})
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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """The config a :meth:`to_dict` mapping describes; fields left out keep their defaults.

        Raises:
            ConfigError: an unknown key, or a value of the wrong type or out of range; the
                message names the field (``weights.usefulness``, ``prior.kappa``, ...).
        """
        return _from_mapping(cls, data, "config")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for benchmarks, logs, ``--json`` and :func:`save_config`)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (Weights, Prior, CoUse)):
                value = {g.name: getattr(value, g.name) for g in fields(value)}
            elif isinstance(value, os.PathLike):
                value = os.fspath(value)
            elif hasattr(value, "to_dict"):  # a RetentionPolicy or PolicySet
                value = value.to_dict()
            elif isinstance(value, Mapping):
                value = {k: ({g.name: getattr(v, g.name) for g in fields(v)}
                             if isinstance(v, Weights) else v) for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


def _default_of(f: Any) -> Any:
    return f.default if f.default is not MISSING else f.default_factory()


#: Settings that are off (None) by default and a dataclass when on.
_OPTIONAL_SETTINGS: dict[str, type] = {"co_use": CoUse}


def _from_mapping(cls: Any, data: Any, where: str) -> Any:
    """Build the dataclass ``cls`` from a mapping, checking each value's kind against the
    field's default (nested dataclasses recursively), so a wrong type is named by its path."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        name = key if where == "config" else f"{where}.{key}"
        f = known.get(key)
        if f is None:
            raise ConfigError(f"{name}: unknown field; expected one of {', '.join(known)}")
        default = _default_of(f)
        if value is None and default is None:  # an optional setting left off, as to_dict writes it
            values[key] = None
            continue
        if value is None:
            raise ConfigError(f"{name}: null is not a value; leave the field out for its default")
        if is_dataclass(default):
            value = _from_mapping(type(default), value, name)
        elif default is None and key in _OPTIONAL_SETTINGS:
            value = _from_mapping(_OPTIONAL_SETTINGS[key], value, name)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{name}: expected true or false, got {value!r}")
        elif isinstance(default, (int, float)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{name}: expected a number, got {value!r}")
        elif isinstance(default, str):
            if not isinstance(value, str):
                raise ConfigError(f"{name}: expected a string, got {value!r}")
        elif isinstance(default, tuple):
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"{name}: expected a list, got {value!r}")
            value = tuple(value)
        elif isinstance(default, Mapping) and not isinstance(value, Mapping):
            raise ConfigError(f"{name}: expected a mapping, got {value!r}")
        values[key] = value
    return cls(**values)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read a config file: JSON (what :func:`save_config` writes) or, on Python 3.11+, TOML
    (by the ``.toml`` suffix). Fields left out keep their defaults.

    Raises:
        ConfigError: the file cannot be read or parsed, or a field is unknown or invalid (the
            message names the file and the field).
    """
    where = os.fspath(path)
    try:
        text = Path(where).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"config file {where!r}: cannot read it: {reason}") from None
    if where.endswith(".toml"):
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise ConfigError(f"config file {where!r}: TOML needs Python 3.11+; use JSON") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {where!r}: not valid TOML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config file {where!r}: not valid JSON: {exc.msg} at line "
                              f"{exc.lineno} column {exc.colno}") from None
    try:
        return Config.from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"config file {where!r}: {exc}") from None


def save_config(config: Config, path: str | os.PathLike[str]) -> None:
    """Write ``config`` as JSON that :func:`load_config` reads back equal; the file is replaced
    whole (written beside it, then renamed), so a reader never sees half a config."""
    if not isinstance(config, Config):
        raise ConfigError(f"config: expected Config, got {type(config).__name__}")
    where = Path(os.fspath(path))
    partial = where.with_name(f".{where.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(config.to_dict(), indent=2, ensure_ascii=False) + "\n",
                       encoding="utf-8")
    os.replace(partial, where)
