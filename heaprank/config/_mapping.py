"""Settings as plain mappings (config files, ``to_dict``): building a dataclass from one with
each value's kind checked and named by its path, the reverse, and the flat shape of 0.1."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from ..errors import ConfigError
from ..model.co_use import CoUse
from ..model.retention import PolicySet, RetentionPolicy

#: Each key of the flat config of heaprank 0.1 that moved into a group: its group and new name.
#: ``weights`` and ``qtype_weights`` stay where they were.
FLAT_KEYS: Mapping[str, tuple[str, str]] = {
    "on_invalid": ("inputs", "on_invalid"),
    "future_tolerance_s": ("inputs", "future_tolerance_s"),
    "doc_features": ("features", "doc_features"),
    "tag_slots": ("features", "tag_slots"),
    "speaker_roles": ("features", "speaker_roles"),
    "stage_slots": ("features", "stage_slots"),
    "feature_prefix_chars": ("features", "prefix_chars"),
    "score_kind": ("scoring", "score_kind"),
    "relevance_floor": ("scoring", "relevance_floor"),
    "rank_tau": ("scoring", "rank_tau"),
    "kind_importance": ("scoring", "kind_importance"),
    "superseded_multiplier": ("scoring", "superseded_multiplier"),
    "intent_recency": ("scoring", "intent_recency"),
    "fusion_weights": ("scoring", "fusion_weights"),
    "half_life_s": ("retention", "half_life_s"),
    "recency_floor": ("retention", "recency_floor"),
    "recency_kernel": ("retention", "recency_kernel"),
    "reinforcement_cap": ("retention", "reinforcement_cap"),
    "retention_policy": ("retention", "policy"),
    "drop_forgotten": ("retention", "drop_forgotten"),
    "prior": ("learning", "prior"),
    "em_credit": ("learning", "em_credit"),
    "reject_discount": ("learning", "reject_discount"),
    "co_use": ("learning", "co_use"),
    "pooled_min_namespaces": ("learning", "pooled_min_namespaces"),
    "refit_every": ("refit", "every"),
    "refit_shrinkage": ("refit", "shrinkage"),
    "refit_window": ("refit", "window"),
    "refit_poll_s": ("refit", "poll_s"),
    "refit_signals": ("refit", "signals"),
    "refit_qtypes": ("refit", "qtypes"),
    "reject_fit_impressions": ("refit", "reject_impressions"),
    "exploration_rate": ("exploration", "rate"),
    "exploration_seed": ("exploration", "seed"),
}


def regroup(data: Any) -> Any:
    """``data`` in the grouped shape: keys of the flat shape move into their groups, with one
    :class:`DeprecationWarning` naming each key's new place. A key given both ways is an error;
    anything but a mapping is left to :func:`from_mapping` to refuse."""
    if not isinstance(data, Mapping):
        return data
    flat = [key for key in data if key in FLAT_KEYS]
    if not flat:
        return data
    out = {key: (dict(value) if isinstance(value, Mapping) else value)
           for key, value in data.items() if key not in FLAT_KEYS}
    for key in flat:
        group, name = FLAT_KEYS[key]
        into = out.setdefault(group, {})
        if not isinstance(into, dict):
            raise ConfigError(f"{group}: expected a mapping of fields, got {type(into).__name__}")
        if name in into:
            raise ConfigError(f"{key}: given twice, flat and as {group}.{name}; keep "
                              f"{group}.{name}")
        into[name] = data[key]
    moved = ", ".join(f"{key} -> {'.'.join(FLAT_KEYS[key])}" for key in flat)
    warnings.warn(f"config: the flat shape is deprecated and stops reading in the next release; "
                  f"write each key in its group ({moved})", DeprecationWarning, stacklevel=3)
    return out


def _default_of(f: Any) -> Any:
    return f.default if f.default is not MISSING else f.default_factory()


#: Settings that are off (None) by default and a dataclass when on.
_OPTIONAL_SETTINGS: dict[str, type] = {"co_use": CoUse}


def _checked(name: str, key: str, default: Any, value: Any) -> Any:
    """``value`` for a field whose default is ``default``, its kind checked (nested
    dataclasses built recursively)."""
    if is_dataclass(default):
        return from_mapping(type(default), value, name)
    if default is None and key in _OPTIONAL_SETTINGS:
        return from_mapping(_OPTIONAL_SETTINGS[key], value, name)
    if isinstance(default, bool):
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
        return tuple(value)
    elif isinstance(default, Mapping) and not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a mapping, got {value!r}")
    return value


def from_mapping(cls: Any, data: Any, where: str) -> Any:
    """Build the dataclass ``cls`` from a mapping, checking each value's kind against the
    field's default, so a wrong type is named by its path (``refit.every``)."""
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
        elif value is None:
            raise ConfigError(f"{name}: null is not a value; leave the field out for its default")
        else:
            values[key] = _checked(name, key, default, value)
    return cls(**values)


def to_plain(value: Any) -> Any:
    """A JSON-ready copy: dataclasses as mappings of their fields, paths as strings, tuples as
    lists, retention policies in their file's form."""
    if isinstance(value, (RetentionPolicy, PolicySet)):
        return value.to_dict()  # the policy file's form
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [to_plain(v) for v in value]
    return value
