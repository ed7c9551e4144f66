"""Ebbinghaus retention and forget policies (Hebb Mind), as pure functions over numpy arrays.

A memory's *stability* ``S`` (days) grows with its importance and with how often it was used::

    S = half_life_days x (1 + k_importance x importance / 10 + k_access x use_count / 10)
    R = exp(-idle_days / S)

``R`` is its retention after ``idle_days`` without use. It serves two purposes
(docs/design.md, "Retention and forgetting"):

- a recency kernel (``Config(retention=Retention(recency_kernel="ebbinghaus"))``): recency is
  ``floor + (1 - floor) x R`` instead of the plain half-life curve;
- a forget policy: a memory counts as *forgotten* once ``R < threshold`` and it has been idle at
  least ``min_retention_days``, i.e. after ``max(min_retention_days, S x ln(1 / threshold))``
  idle days. heaprank never deletes a caller's documents: forgetting means reporting them
  (``Reranker.forget_candidates``) and, when asked, dropping them from rankings.

Policies are a global default plus per-namespace overrides, read from a TOML or JSON file that an
operator owns (never from the state). The file is re-read when its modification time or size
changes, so an edit takes effect on the next call without a restart.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Union

import numpy as np

from .._time import DAY_S
from ..errors import ConfigError, MissingDependencyError

logger = logging.getLogger("heaprank")

#: The namespace table of a policy file.
NAMESPACES_KEY = "namespaces"


def _number(where: str, value: object, *, low: float, low_open: bool, high: float = math.inf,
            high_open: bool = True) -> float:
    """``value`` as a float if it is a finite number in the interval, else a ConfigError naming
    ``where`` (infinite stability would mean "never forget": that is ``enabled = false``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: expected a number, got {type(value).__name__}")
    v = float(value)
    inside = math.isfinite(v) and (v > low if low_open else v >= low) and (
        v < high if high_open else v <= high)
    if not inside:
        bounds = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ConfigError(f"{where}: must be a finite number in {bounds}, got {value!r}")
    return v


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """How fast the memories of one namespace fade, and when they count as forgotten.

    The defaults are Hebb Mind's global ones.

    Args:
        half_life_days: Base stability ``S`` in days: a neutral memory never used keeps
            ``exp(-1)``, about 37%, after this many idle days (an e-folding time, as in
            Hebb Mind, not a time to 50%).
        k_importance: How much importance lengthens ``S`` (importance is the candidate's dose,
            read on Hebb Mind's 0-10 scale: ``importance / 10``).
        k_access: How much each use lengthens ``S`` (``use_count / 10``, not capped).
        threshold: Retention below which a memory counts as forgotten, in (0, 1).
        min_retention_days: No memory counts as forgotten before it has been idle this long,
            whatever the other fields say.
        enabled: ``False`` exempts the namespace: nothing of it is ever forgotten (its
            retention still serves as the recency kernel).
    """

    half_life_days: float = 60.0
    k_importance: float = 2.0
    k_access: float = 1.5
    threshold: float = 0.3
    min_retention_days: float = 1.0
    enabled: bool = True

    def __post_init__(self) -> None:
        _check_fields(self.to_dict(), "policy")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_FIELDS = tuple(f.name for f in fields(RetentionPolicy))


def _check_fields(values: Mapping[str, Any], where: str) -> None:
    """Validate a full set of policy fields, naming ``where`` (a file, a namespace) and the
    field in the message."""
    _number(f"{where}.half_life_days", values["half_life_days"], low=0.0, low_open=True)
    _number(f"{where}.k_importance", values["k_importance"], low=0.0, low_open=False)
    _number(f"{where}.k_access", values["k_access"], low=0.0, low_open=False)
    _number(f"{where}.threshold", values["threshold"], low=0.0, low_open=True, high=1.0)
    _number(f"{where}.min_retention_days", values["min_retention_days"], low=0.0,
            low_open=False)
    if not isinstance(values["enabled"], bool):
        raise ConfigError(f"{where}.enabled: expected true or false, got "
                          f"{type(values['enabled']).__name__}")


def _policy(base: Mapping[str, Any], changes: Mapping[str, Any], where: str) -> RetentionPolicy:
    """``base`` with ``changes`` applied, checked under the name ``where``."""
    values = {**base, **changes}
    _check_fields(values, where)
    return RetentionPolicy(**values)


@dataclass(frozen=True, slots=True)
class PolicySet:
    """A global :class:`RetentionPolicy` and per-namespace overrides of some of its fields.

    ``overrides`` maps a namespace to the fields it sets; a field it leaves out (or sets to
    null in JSON) inherits the global value.
    """

    default: RetentionPolicy = field(default_factory=RetentionPolicy)
    overrides: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    _effective: dict[str, RetentionPolicy] = field(default_factory=dict, init=False, repr=False,
                                                   compare=False)

    def __post_init__(self) -> None:
        base = self.default.to_dict()
        effective = {ns: _policy(base, dict(changes), f"{NAMESPACES_KEY}.{ns}")
                     for ns, changes in self.overrides}
        object.__setattr__(self, "_effective", effective)

    def for_namespace(self, namespace: str) -> RetentionPolicy:
        """The effective policy of ``namespace``: its overrides over the global default."""
        return self._effective.get(namespace, self.default)

    @property
    def namespaces(self) -> tuple[str, ...]:
        """The namespaces with overrides, in file order."""
        return tuple(ns for ns, _ in self.overrides)

    def to_dict(self) -> dict[str, Any]:
        return {**self.default.to_dict(),
                NAMESPACES_KEY: {ns: dict(changes) for ns, changes in self.overrides}}


def _fields_of(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The non-null policy fields of one table; an unknown key is an error (a typo must not
    silently leave a namespace on the defaults)."""
    out = {}
    for key, value in table.items():
        if key not in _FIELDS:
            raise ConfigError(f"{where}: unknown field {key!r} (expected one of "
                              f"{', '.join(_FIELDS)})")
        if value is not None:
            out[key] = value
    return out


def parse_policy(data: object, source: str = "policy") -> PolicySet:
    """A :class:`PolicySet` from the parsed content of a policy file.

    The top level holds the global fields; the ``namespaces`` table maps a namespace to the
    fields it overrides (null or absent: inherited).

    Raises:
        ConfigError: not a table, an unknown field, or a value out of range; the message names
            ``source`` and the field.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a table of policy fields, got {type(data).__name__}")
    top = {k: v for k, v in data.items() if k != NAMESPACES_KEY}
    default = _policy(RetentionPolicy().to_dict(), _fields_of(top, source), source)
    tables = data.get(NAMESPACES_KEY) or {}
    if not isinstance(tables, Mapping):
        raise ConfigError(f"{source}.{NAMESPACES_KEY}: expected a table of namespaces")
    overrides = []
    for ns, table in tables.items():
        where = f"{source}.{NAMESPACES_KEY}.{ns}"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: expected a table of policy fields")
        changes = _fields_of(table, where)
        _policy(default.to_dict(), changes, where)
        overrides.append((str(ns), tuple(changes.items())))
    return PolicySet(default, tuple(overrides))


def _toml(text: str, source: str) -> Any:
    try:
        import tomllib as toml
    except ImportError:  # Python 3.10
        try:
            import tomli as toml  # type: ignore[no-redef]
        except ImportError:
            raise MissingDependencyError(
                f"{source}: a TOML policy needs Python 3.11 or the 'tomli' package (pip install "
                "tomli); or write the policy as JSON") from None
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None


def load_policy(path: str | os.PathLike[str]) -> PolicySet:
    """Read a policy file: TOML when it ends in ``.toml``, JSON otherwise.

    Raises:
        ConfigError: unreadable, malformed, or holding an invalid field.
    """
    source = str(path)
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"retention policy {source!r}: cannot read it: "
                          f"{exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"retention policy {source!r}: not UTF-8 text ({exc.reason})") from None
    if source.lower().endswith(".toml"):
        return parse_policy(_toml(text, source), source)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc.msg} at line {exc.lineno} column "
                          f"{exc.colno}") from None
    return parse_policy(data, source)


class PolicyFile:
    """A policy file, re-read when its modification time or size changes.

    One ``os.stat`` per :meth:`current` call (one per rerank, never per candidate). The first
    read must succeed; a later edit that breaks the file keeps the last good policy and logs a
    warning once, so a typo in production degrades to the previous policy rather than to failed
    requests.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._signature: tuple[int, int, int] | None = None
        self._policy: PolicySet | None = None

    def __repr__(self) -> str:
        return f"PolicyFile({str(self.path)!r})"

    def current(self) -> PolicySet:
        """The policy as the file says now."""
        try:
            st = os.stat(self.path)
            signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError as exc:
            if self._policy is None:
                raise ConfigError(f"retention policy {str(self.path)!r}: cannot read it: "
                                  f"{exc.strerror or exc}") from None
            signature = (-1, -1, -1)
        if signature == self._signature and self._policy is not None:
            return self._policy
        with self._lock:
            if signature != self._signature or self._policy is None:
                try:
                    self._policy = load_policy(self.path)
                except ConfigError as exc:
                    if self._policy is None:
                        raise
                    logger.warning("heaprank: retention policy not reloaded, keeping the "
                                   "previous one: %s", exc)
                self._signature = signature
            return self._policy


PolicySpec = Union[str, "os.PathLike[str]", PolicySet, RetentionPolicy, None]

_FILES: OrderedDict[Path, PolicyFile] = OrderedDict()
_FILES_LOCK = threading.Lock()
_MAX_FILES = 32


def resolve_policy(spec: PolicySpec) -> PolicySet:
    """The :class:`PolicySet` a ``Config.retention.policy`` names: the built-in defaults for
    ``None``, the object itself, or the current content of a file (one shared, hot-reloaded
    :class:`PolicyFile` per path in this process)."""
    if spec is None:
        return _DEFAULT_SET
    if isinstance(spec, PolicySet):
        return spec
    if isinstance(spec, RetentionPolicy):
        return PolicySet(spec)
    path = Path(spec).expanduser().absolute()
    with _FILES_LOCK:
        source = _FILES.get(path)
        if source is None:
            source = _FILES[path] = PolicyFile(path)
            while len(_FILES) > _MAX_FILES:
                _FILES.popitem(last=False)
        else:
            _FILES.move_to_end(path)
    return source.current()


_DEFAULT_SET = PolicySet()


# ------------------------------------------------------------------------------- the math


def stability_days(importance: np.ndarray, use_count: np.ndarray,
                   policy: RetentionPolicy) -> np.ndarray:
    """``S = half_life_days x (1 + k_importance x importance / 10 + k_access x uses / 10)``."""
    return policy.half_life_days * (1.0 + policy.k_importance * np.asarray(importance) / 10.0
                                    + policy.k_access * np.asarray(use_count) / 10.0)


def retention(idle_days: np.ndarray, importance: np.ndarray, use_count: np.ndarray,
              policy: RetentionPolicy) -> np.ndarray:
    """``R = exp(-idle_days / S)`` in (0, 1]; an unknown idle time (NaN) keeps everything: 1.

    Negative idle times (a clock ahead of ``now``) count as 0.
    """
    idle = np.asarray(idle_days, dtype=np.float64)
    r = np.exp(-np.maximum(idle, 0.0) / stability_days(importance, use_count, policy))
    return np.where(np.isnan(idle), 1.0, r)


def days_until_forgotten(importance: np.ndarray, use_count: np.ndarray,
                         policy: RetentionPolicy) -> np.ndarray:
    """Idle days after which a memory counts as forgotten:
    ``max(min_retention_days, S x ln(1 / threshold))``; ``inf`` when the policy is disabled."""
    days = np.maximum(policy.min_retention_days,
                      stability_days(importance, use_count, policy) * math.log(1.0 / policy.threshold))
    return days if policy.enabled else np.full_like(days, math.inf)


def forgotten(idle_days: np.ndarray, importance: np.ndarray, use_count: np.ndarray,
              policy: RetentionPolicy) -> np.ndarray:
    """True where the policy counts a memory as forgotten: enabled, idle at least
    ``min_retention_days`` and retention below ``threshold``. Unknown idle time: never."""
    idle = np.asarray(idle_days, dtype=np.float64)
    if not policy.enabled:
        return np.zeros(idle.shape, dtype=bool)
    r = retention(idle, importance, use_count, policy)
    known = ~np.isnan(idle)
    return known & (np.nan_to_num(idle) >= policy.min_retention_days) & (r < policy.threshold)


def ebbinghaus_recency(age_s: np.ndarray, importance: np.ndarray, use_count: np.ndarray,
                       policy: RetentionPolicy, *, floor: float) -> np.ndarray:
    """The recency signal from retention: ``floor + (1 - floor) x R``, kept above 0 (only a rule
    may zero a score); unknown age is neutral (1), as with the half-life kernel."""
    r = retention(np.asarray(age_s) / DAY_S, importance, use_count, policy)
    return np.maximum(floor + (1.0 - floor) * r, 1e-300)


# --------------------------------------------------------------------------- the report


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What a retention policy would forget in one namespace; nothing is deleted.

    Attributes:
        namespace: The namespace examined.
        policy: Its effective policy (overrides over the global default).
        checked: How many documents were examined.
        ids: The forgotten ones, least retained first (ties by id).
        retention: Their retention, aligned with ``ids``.
        idle_days: Their idle time in days, aligned with ``ids``.
    """

    namespace: str
    policy: RetentionPolicy
    checked: int
    ids: tuple[str, ...]
    retention: tuple[float, ...]
    idle_days: tuple[float, ...]

    @property
    def count(self) -> int:
        """How many documents the policy counts as forgotten."""
        return len(self.ids)

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "policy": self.policy.to_dict(),
                "checked": self.checked, "count": self.count, "ids": list(self.ids),
                "retention": list(self.retention), "idle_days": list(self.idle_days)}


def forget_report(namespace: str, ids: tuple[str, ...], idle_days: np.ndarray,
                  importance: np.ndarray, use_count: np.ndarray,
                  policy: RetentionPolicy) -> ForgetReport:
    """The :class:`ForgetReport` of documents with these idle times, importances and uses."""
    mask = forgotten(idle_days, importance, use_count, policy)
    r = retention(idle_days, importance, use_count, policy)
    chosen = np.flatnonzero(mask).tolist()
    chosen.sort(key=lambda i: (float(r[i]), ids[i]))
    return ForgetReport(namespace, policy, len(ids), tuple(ids[i] for i in chosen),
                        tuple(float(r[i]) for i in chosen),
                        tuple(float(idle_days[i]) for i in chosen))
