"""How one candidate's fields are read: the rule each value must keep, and what a bad one
raises or, with lenient handling, how it is neutralised and flagged.

The rules themselves are listed in the :mod:`heaprank.scoring.candidates` docstring;
:func:`~heaprank.scoring.candidates.coerce_checked` applies them candidate by candidate.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np

from .._checks import MAX_LABEL_CHARS, preview
from .._time import EARLIEST_S, NUMBER_TYPES, check_epoch, parse_time
from ..errors import InputError, InputTypeError

OnInvalid = Literal["raise", "neutral"]

#: Largest explicit importance dose accepted. The kind priors span 0.6-1.5 and aggregated
#: memories are clamped to 3, so a dose beyond 10 is a unit mistake, not a preference.
MAX_IMPORTANCE = 10.0

_FLOAT_MAX = sys.float_info.max
#: Numeric shape fields: (lowest, highest, lowest excluded, the rule as the error states it).
#: Times are checked separately; every number must also be finite.
_RANGES: dict[str, tuple[float, float, bool, str]] = {
    "importance": (0.0, MAX_IMPORTANCE, True, f"must be in (0, {MAX_IMPORTANCE:g}]"),
    "source_count": (0.0, _FLOAT_MAX, False, "must be >= 0"),
    "confidence": (0.0, 1.0, False, "must be in [0, 1]"),
    "version": (-_FLOAT_MAX, _FLOAT_MAX, False, "must be finite"),
    "position": (-_FLOAT_MAX, _FLOAT_MAX, False, "must be finite"),
}


class FieldChecker:
    """Reads one candidate's fields, raising or flagging bad values by ``on_invalid``."""

    def __init__(self, where: str, on_invalid: OnInvalid, keys: Mapping[str, str]) -> None:
        self.where = where
        self.strict = on_invalid == "raise"
        self.keys = keys  # field -> where its value came from, e.g. "metadata.timestamp"
        self.flags: list[str] = []

    def locate(self, name: str) -> str:
        """``candidates[i] (id ...).metadata.<key>`` for field ``name`` (``tags[2]`` too); the
        field is added when the key is one of its aliases, so the message says both."""
        base, _, index = name.partition("[")
        key = self.keys.get(base)
        if key is None:
            return f"{self.where}.{name}"
        alias = "" if key.endswith("." + base) or key == base else f" ({base})"
        return f"{self.where}.{key}{'[' + index if index else ''}{alias}"

    def bad(self, name: str, message: str) -> None:
        if self.strict:
            raise InputError(f"{self.locate(name)}: {message}")
        self.flags.append(f"{name} {message}")

    def wrong_type(self, name: str, expected: str, value: object) -> None:
        if self.strict:
            raise InputTypeError(f"{self.locate(name)}: expected {expected}, got "
                                 f"{type(value).__name__}")
        self.flags.append(f"{name} not {expected} ({type(value).__name__})")

    def number(self, name: str, value: Any) -> float:
        if value is None:
            return math.nan
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, NUMBER_TYPES):
            self.wrong_type(name, "a number", value)
            return math.nan
        try:
            out = float(value)
        except OverflowError:  # an int beyond the float range
            self.bad(name, "must be finite, got an integer too large for a float")
            return math.nan
        if not math.isfinite(out):
            self.bad(name, f"must be finite, got {out!r}")
            return math.nan
        return out

    def ranged(self, name: str, value: Any) -> float:
        out = self.number(name, value)
        low, high, open_low, rule = _RANGES[name]
        if math.isnan(out) or (low < out <= high if open_low else low <= out <= high):
            return out
        self.bad(name, f"{rule}, got {out!r}")
        return math.nan

    def time(self, name: str, value: Any, now: float, tolerance_s: float) -> float:
        if value is None:
            return math.nan
        where = self.locate(name)
        try:
            out = parse_time(value, where)
        except (InputError, InputTypeError):
            if self.strict:
                raise
            self.flags.append(f"{name} unparsable")
            return math.nan
        try:
            check_epoch(out, where)
        except InputError:
            if self.strict:
                raise
            self.flags.append(f"{name} not a plausible time ({out!r})")
            return math.nan
        if out > now + tolerance_s:
            if self.strict:
                raise InputError(f"{where}: {preview(value)} is in the future (now={now:.0f}); "
                                 f"pass now= or on_invalid='neutral'")
            self.flags.append(f"{name} in the future, clamped")
            return now
        return min(out, now)

    def label(self, name: str, value: Any, *, ints: bool = False) -> str | None:
        if value is None:
            return None
        if ints and isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return str(int(value))
        if not isinstance(value, str):
            self.wrong_type(name, "str or int" if ints else "str", value)
            return None
        if not encodable(value):
            self.bad(name, "contains a lone surrogate (not encodable as UTF-8)")
            return None
        if not ints and len(value) > MAX_LABEL_CHARS:
            self.bad(name, too_long(value))
            return None
        return value or None

    def tags(self, value: Any) -> frozenset[str]:
        if value is None:
            return frozenset()
        if isinstance(value, str):
            value = (value,)
        elif not isinstance(value, (list, tuple, set, frozenset)):
            self.wrong_type("tags", "a str or a list of str", value)
            return frozenset()
        out = []
        for j, tag in enumerate(value):
            if not isinstance(tag, str):
                self.wrong_type(f"tags[{j}]", "str", tag)
                return frozenset()  # lenient: a bad tag voids the set, never a partial one
            if not encodable(tag):
                self.bad(f"tags[{j}]", "contains a lone surrogate (not encodable as UTF-8)")
                return frozenset()
            if len(tag) > MAX_LABEL_CHARS:
                self.bad(f"tags[{j}]", too_long(tag))
                return frozenset()
            if tag:
                out.append(tag)
        return frozenset(out)

    def flag(self, name: str, value: Any) -> bool:
        if value is None:
            return False
        if not isinstance(value, (bool, np.bool_)):
            self.wrong_type(name, "bool", value)
            return False
        return bool(value)


def too_long(label: str) -> str:
    """The error of a label over :data:`~heaprank._checks.MAX_LABEL_CHARS` characters."""
    return f"{len(label)} characters, at most {MAX_LABEL_CHARS} allowed"


def long_label(labels: Iterable[str | None], tags: Iterable[frozenset[str]]) -> bool:
    """Whether any of these labels or tags is over :data:`~heaprank._checks.MAX_LABEL_CHARS`
    characters (the C kernel does not check it: the checked path then says which)."""
    if any(label is not None and len(label) > MAX_LABEL_CHARS for label in labels):
        return True
    return any(len(tag) > MAX_LABEL_CHARS for group in tags for tag in group)


def encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ------------------------------------------------- plain values (the fast Python path's checks)

#: Inclusive bounds of the ranged columns; (0, 10] is [smallest float > 0, 10] for floats.
BOUNDS: dict[str, tuple[float, float]] = {
    name: (math.nextafter(low, math.inf) if open_low else low, high)
    for name, (low, high, open_low, _) in _RANGES.items()}

#: What the fast path takes of each shape field, by the checks of :func:`_plain_value`.
PLAIN_CHECK = {**dict.fromkeys(("created_at", "last_used"), "time"),
                **dict.fromkeys(_RANGES, "ranged"), "kind": "label", "source": "label",
                "key": "intlabel", "thread": "intlabel", "tags": "tags", "superseded": "flag"}
DEFER = object()  # a value the fast path leaves to the checked path


def plain_text(value: object) -> bool:
    """Whether ``value`` is an exact, non-blank str encodable as UTF-8 (an id, a text)."""
    return type(value) is str and not value.isspace() and value != "" and (
        value.isascii() or encodable(value))


def plain_number(value: object) -> float | None:
    """A finite exact int or float as a float, else None (a bool is not a number here)."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def plain_label(value: object) -> object:
    """An exact str label as the batch holds it (``""``: None), else :data:`DEFER`."""
    if type(value) is str and (value.isascii() or encodable(value)):
        return value or None
    return DEFER


def plain_tags(value: object) -> object:
    """A str or a list or tuple of exact str as a frozenset without ``""``, else DEFER."""
    tags = (value,) if type(value) is str else value
    if type(tags) is not list and type(tags) is not tuple:
        return DEFER
    for tag in tags:
        if plain_label(tag) is DEFER or len(tag) > MAX_LABEL_CHARS:
            return DEFER
    return frozenset(tags).difference(("",)) if "" in tags else frozenset(tags)


def plain_value(name: str, value: object, now: float, latest: float) -> object:
    """Shape field ``name``'s value as the checked path stores it when it flags nothing, or
    :data:`DEFER` (anything else: the checked path decides, and words the error)."""
    check = PLAIN_CHECK[name]
    if check == "time" or check == "ranged":
        x = plain_number(value)
        low, high = (EARLIEST_S, latest) if check == "time" else BOUNDS[name]
        if x is None or not low <= x <= high:
            return DEFER
        return min(x, now) if check == "time" else x
    if check == "label":  # (a label over the cap: the checked path names it)
        return plain_label(value) if type(value) is not str \
            or len(value) <= MAX_LABEL_CHARS else DEFER
    if check == "intlabel":
        return str(value) if type(value) is int else plain_label(value)
    if check == "tags":
        return plain_tags(value)
    return value if type(value) is bool else DEFER
