"""Candidates: what a retriever returned, converted once at the boundary into arrays.

A candidate is a :class:`Candidate`, a mapping ``{"id", "text", "score", "metadata"}`` (the
shape fields below may also sit at the top level of the mapping, where they win over
``metadata``), or any object with a ``to_candidate()`` method. :func:`coerce_candidates`
validates them and returns a :class:`CandidateBatch` of arrays; after that point the scoring
code sees arrays only.

There is one specification of a valid candidate, :func:`coerce_checked`, which goes candidate
by candidate and names the candidate and field of the first bad value. :func:`coerce_fast`
builds the same batch column by column for clean input and returns ``None`` (never raises) at
anything it is not sure of, so the checked path decides; a property test proves the two agree.

Typed fields (in ``metadata`` under any of the keys of :data:`DEFAULT_FIELD_KEYS`):

- ``id``: ``str``, not empty, not whitespace only, encodable as UTF-8 (no lone surrogates).
- ``text``: ``str`` encodable as UTF-8; empty or blank text is invalid.
- ``score``: a finite number (``int``, ``float``, numpy number; not ``bool``); every candidate
  has one or none does.
- ``created_at``, ``last_used``: a time (see :mod:`heaprank._time`): a plausible epoch in
  seconds (1900-2200), a ``datetime`` (naive is UTC) or an ISO 8601 string; up to
  ``future_tolerance_s`` in the future counts as now.
- ``importance``: a dose in (0, :data:`MAX_IMPORTANCE`]; 1.0 is neutral.
- ``source_count`` >= 0, ``confidence`` in [0, 1], ``version`` and ``position`` finite numbers.
- ``kind``, ``source``: ``str``; ``""`` means absent.
- ``key``, ``thread``: ``str`` or ``int`` (an int is read as its decimal string, so ``7`` and
  ``"7"`` are the same key); ``""`` means absent.
- ``tags``: a ``str`` (one tag) or a list, tuple or set of ``str``; empty tags are dropped.
- ``superseded``: ``bool`` only (the string ``"false"`` is an error, not true).

Label values (``kind``, ``source``, ``key``, ``thread``, ``tags``) must be encodable as UTF-8.
A value of the wrong type raises :class:`~heaprank.errors.InputTypeError`, a bad value
:class:`~heaprank.errors.InputError`, both naming the field
(``candidates[3] (id 'x').importance: ...``). With ``on_invalid="neutral"`` a bad shape field,
score or blank text is neutralised instead (absent, or ``False`` for ``superseded``) and
flagged; a bad id, a text of the wrong type or with a lone surrogate, a metadata that is not a
mapping, or an unknown top-level field is always an error.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import filterfalse
from operator import itemgetter
from typing import Any, Literal, NamedTuple, Protocol, Union, runtime_checkable

import numpy as np

from .._accel import speedups
from .._checks import check_id, preview
from .._time import EARLIEST_S, LATEST_S, NUMBER_TYPES, check_epoch, parse_time, to_epoch
from ..errors import InputError, InputTypeError

OnInvalid = Literal["raise", "neutral"]

#: Shape fields read from a candidate's metadata, and the metadata keys each may come from.
DEFAULT_FIELD_KEYS: Mapping[str, tuple[str, ...]] = {
    "created_at": ("created_at", "timestamp"),
    "last_used": ("last_used", "last_accessed_at", "__last_accessed__"),
    "importance": ("importance",),
    "kind": ("kind", "type"),
    "source": ("source", "speaker"),
    "key": ("key",),
    "version": ("version",),
    "tags": ("tags",),
    "source_count": ("source_count",),
    "confidence": ("confidence",),
    "thread": ("thread", "session"),
    "position": ("position", "turn"),
    "superseded": ("superseded",),
}

#: Largest explicit importance dose accepted. The kind priors span 0.6-1.5 and aggregated
#: memories are clamped to 3, so a dose beyond 10 is a unit mistake, not a preference.
MAX_IMPORTANCE = 10.0

_FIELDS = tuple(DEFAULT_FIELD_KEYS)
_TOP_LEVEL = frozenset({"id", "text", "score", "metadata"})
_ALLOWED_TOP_LEVEL = _TOP_LEVEL | frozenset(_FIELDS)
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


@dataclass(frozen=True, slots=True)
class Candidate:
    """One retrieved item. heaprank never stores it; the ``id`` is what learned stats hang on.

    The accepted types and ranges of each metadata field are listed in the
    :mod:`heaprank.scoring.candidates` module docstring (``superseded`` is a ``bool``, ``importance``
    in (0, 10], ``key`` a ``str`` or ``int``, ``tags`` a ``str`` or a list of ``str``, ...).

    Args:
        id: Stable identity across calls.
        text: What the model would read.
        score: The retriever's score (similarity, or distance with ``score_kind="distance"``);
            ``None`` ranks by position instead.
        metadata: Shape fields (``created_at``, ``kind``, ``source``, ``importance``, ``key``,
            ``tags``, ``source_count``, ...) and anything else the caller keeps.
    """

    id: str
    text: str
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class SupportsCandidate(Protocol):
    """Anything an adapter can turn into a :class:`Candidate`."""

    def to_candidate(self) -> Candidate: ...


CandidateLike = Union[Candidate, Mapping[str, Any], SupportsCandidate]


@dataclass(frozen=True, slots=True, eq=False)
class CandidateBatch:
    """The validated candidates as parallel arrays (internal; one row per candidate)."""

    items: tuple[Candidate | Mapping[str, Any], ...]  # the caller's items, converted on demand
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    scores: np.ndarray  # float64, NaN where the retriever gave none
    created_at: np.ndarray  # float64 epoch, NaN when unknown
    last_used: np.ndarray  # float64 epoch from metadata, NaN when unknown
    importance: np.ndarray  # float64 dose, NaN when unset
    source_count: np.ndarray
    confidence: np.ndarray
    version: np.ndarray
    position: np.ndarray
    kinds: tuple[str | None, ...]
    sources: tuple[str | None, ...]
    keys: tuple[str | None, ...]
    threads: tuple[str | None, ...]
    tags: tuple[frozenset[str], ...]
    superseded: np.ndarray  # bool: the caller says a newer version exists
    flags: tuple[tuple[str, ...], ...]  # per candidate: what lenient handling neutralised

    def __len__(self) -> int:
        return len(self.ids)

    def absent(self, name: str) -> bool:
        """Whether no candidate gave shape field ``name``, known without reading the column:
        the column is the batch size's shared absent one (False means: maybe given)."""
        shared = _ABSENT.get(len(self.ids))
        return shared is not None and getattr(self, name) is shared[name]

    def candidate(self, i: int) -> Candidate:
        """Candidate ``i`` as a :class:`Candidate` (built on demand from a mapping, its metadata
        a copy of the caller's with top-level shape fields merged in)."""
        item = self.items[i]
        if isinstance(item, Candidate):
            return item
        meta = dict(item.get("metadata") or {})
        meta.update((k, v) for k, v in item.items() if k in DEFAULT_FIELD_KEYS and v is not None)
        return Candidate(self.ids[i], self.texts[i], item.get("score"), meta)

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        return tuple(self.candidate(i) for i in range(len(self.ids)))


def coerce_candidates(
    items: Sequence[CandidateLike] | Any,
    *,
    now: float,
    on_invalid: OnInvalid = "raise",
    field_keys: Mapping[str, tuple[str, ...]] = DEFAULT_FIELD_KEYS,
    future_tolerance_s: float = 300.0,
) -> CandidateBatch:
    """Validate and convert candidates into a :class:`CandidateBatch`.

    Raises:
        InputError: empty list, duplicate, blank or unencodable id, empty text, NaN/inf score,
            a value out of range, an unparsable or implausible time (unless
            ``on_invalid="neutral"``), a ``now`` that is not a plausible time.
        InputTypeError: a value of the wrong type (non-string id or text, say).
    """
    if type(items) is not list and type(items) is not tuple:  # the usual case skips the ABC test
        if isinstance(items, (str, bytes, Mapping)):
            raise InputTypeError(f"candidates: expected a sequence of candidates, got "
                                 f"{type(items).__name__}")
        if not isinstance(items, (list, tuple)):
            try:
                items = list(items)
            except TypeError:
                raise InputTypeError(f"candidates: expected a sequence of candidates, got "
                                     f"{type(items).__name__}") from None
    if len(items) == 0:
        raise InputError("candidates: empty; pass at least one candidate")
    now = to_epoch(now, "now")
    if field_keys is DEFAULT_FIELD_KEYS:
        if speedups is not None:
            built = coerce_c(items, now=now, future_tolerance_s=future_tolerance_s)
            if built is not None:
                return built
        reverse = _DEFAULT_REVERSE
    else:
        reverse = _reverse_keys(field_keys)
    fast = coerce_fast(items, now=now, future_tolerance_s=future_tolerance_s, reverse=reverse)
    if fast is not None:
        return fast
    return coerce_checked(items, now=now, on_invalid=on_invalid, reverse=reverse,
                          future_tolerance_s=future_tolerance_s)


def _reverse_keys(field_keys: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, int]]:
    """metadata key -> (field, priority): one pass over a candidate's metadata finds every
    shape field (the metadata is usually small; the key table is not)."""
    return {key: (name, rank) for name, keys in field_keys.items() for rank, key in enumerate(keys)}


_DEFAULT_REVERSE = _reverse_keys(DEFAULT_FIELD_KEYS)


# ------------------------------------------------------------------ the checked path (the spec)

def _located_fields(meta: Mapping[str, Any],
                    reverse: dict[str, tuple[str, int]]) -> dict[str, tuple[str, Any]]:
    """The shape fields in ``meta`` and the key each came from: for each field, its
    highest-priority key that is present with a value other than None."""
    found: dict[str, tuple[int, str, Any]] = {}
    for key, value in meta.items():
        hit = reverse.get(key) if isinstance(key, str) else None
        if hit is None or value is None:
            continue
        name, rank = hit
        if name not in found or rank < found[name][0]:
            found[name] = (rank, key, value)
    return {name: (key, value) for name, (_, key, value) in found.items()}


class _Checker:
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
        if not _encodable(value):
            self.bad(name, "contains a lone surrogate (not encodable as UTF-8)")
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
            if not _encodable(tag):
                self.bad(f"tags[{j}]", "contains a lone surrogate (not encodable as UTF-8)")
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


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parts(item: object, where: str) -> tuple[Candidate | Mapping[str, Any], Any, Any, Any, Any,
                                              dict[str, Any]]:
    """``(stored item, id, text, score, metadata, top-level shape fields)`` of one input."""
    if isinstance(item, Candidate):
        return item, item.id, item.text, item.score, item.metadata, {}
    if isinstance(item, Mapping):
        unknown = set(item) - _ALLOWED_TOP_LEVEL
        if unknown:
            raise InputError(f"{where}: unknown field(s) {sorted(map(str, unknown))}; "
                             f"expected id, text, score, metadata or a shape field")
        for required in ("id", "text"):
            if required not in item:
                raise InputError(f"{where}.{required}: missing")
        top = {k: v for k, v in item.items() if k in DEFAULT_FIELD_KEYS and v is not None}
        return item, item["id"], item["text"], item.get("score"), item.get("metadata"), top
    if isinstance(item, SupportsCandidate):
        out = item.to_candidate()
        if not isinstance(out, Candidate):
            raise InputTypeError(f"{where}: to_candidate() returned {type(out).__name__}, "
                                 f"not Candidate")
        return _parts(out, where)
    raise InputTypeError(f"{where}: expected a Candidate, a mapping or an object with "
                         f"to_candidate(), got {type(item).__name__}")


def _shape_row(check: _Checker, score: Any, values: Mapping[str, Any], now: float,
               future_tolerance_s: float) -> dict[str, Any]:
    """One candidate's checked score and shape fields, by field name."""
    get = values.get
    row: dict[str, Any] = {"score": check.number("score", score)}
    for name in ("created_at", "last_used"):
        row[name] = check.time(name, get(name), now, future_tolerance_s)
    for name in _RANGES:
        row[name] = check.ranged(name, get(name))
    for name in ("kind", "source"):
        row[name] = check.label(name, get(name))
    for name in ("key", "thread"):
        row[name] = check.label(name, get(name), ints=True)
    row["tags"] = check.tags(get("tags"))
    row["superseded"] = check.flag("superseded", get("superseded"))
    return row


def coerce_checked(items: Sequence[Any], *, now: float, on_invalid: OnInvalid = "raise",
                   reverse: dict[str, tuple[str, int]] = _DEFAULT_REVERSE,
                   future_tolerance_s: float = 300.0) -> CandidateBatch:
    """The specification: validate candidate by candidate, raising or flagging with the
    candidate and field named. ``items`` is a non-empty list or tuple."""
    stored: list[Candidate | Mapping[str, Any]] = []
    seen: dict[str, int] = {}
    cols: dict[str, list[Any]] = {name: [] for name in ("ids", "texts", "score", "flags", *_FIELDS)}
    for i, item in enumerate(items):
        kept, cid, text, score, meta, top = _parts(item, f"candidates[{i}]")
        cid = check_id(cid, f"candidates[{i}].id")
        where = f"candidates[{i}] (id {preview(cid)})"
        if cid in seen:
            raise InputError(f"{where}.id: duplicate of candidates[{seen[cid]}]")
        seen[cid] = i
        if not isinstance(text, str):
            raise InputTypeError(f"{where}.text: expected str, got {type(text).__name__}")
        if not _encodable(text):
            raise InputError(f"{where}.text: contains a lone surrogate (not encodable as UTF-8)")
        if not isinstance(meta, (Mapping, type(None))):
            raise InputTypeError(f"{where}.metadata: expected a mapping, got {type(meta).__name__}")
        located = _located_fields(meta or {}, reverse)
        check = _Checker(where, on_invalid, {**{name: f"metadata.{key}" for name, (key, _) in
                                                 located.items()}, **{name: name for name in top}})
        if not text.strip():
            check.bad("text", "empty")
        values = {**{name: value for name, (_, value) in located.items()}, **top}
        for name, value in _shape_row(check, score, values, now, future_tolerance_s).items():
            cols[name].append(value)
        cols["flags"].append(tuple(check.flags))
        cols["ids"].append(cid)
        cols["texts"].append(text)
        stored.append(kept)
    scores = np.array(cols["score"], dtype=np.float64)
    given = ~np.isnan(scores) | np.array([any(f.startswith("score") for f in fl)
                                          for fl in cols["flags"]], dtype=bool)
    if given.any() and not given.all():
        missing = int(np.flatnonzero(~given)[0])
        raise InputError(f"candidates[{missing}].score: missing while other candidates have "
                         f"scores; give every candidate a score or none")
    return _batch(stored, cols, scores)


def _batch(stored: Sequence[Any], cols: Mapping[str, Any], scores: np.ndarray) -> CandidateBatch:
    def f64(name: str) -> np.ndarray:
        col = cols[name]
        return col if isinstance(col, np.ndarray) else np.array(col, dtype=np.float64)

    return CandidateBatch(
        items=tuple(stored), ids=tuple(cols["ids"]), texts=tuple(cols["texts"]), scores=scores,
        created_at=f64("created_at"), last_used=f64("last_used"), importance=f64("importance"),
        source_count=f64("source_count"), confidence=f64("confidence"), version=f64("version"),
        position=f64("position"), kinds=tuple(cols["kind"]), sources=tuple(cols["source"]),
        keys=tuple(cols["key"]), threads=tuple(cols["thread"]), tags=tuple(cols["tags"]),
        superseded=np.asarray(cols["superseded"], dtype=bool),
        flags=tuple(cols["flags"]))


# ------------------------------------------------------- the fast path (a cache of the checked one)

_NONE = type(None)
_STR = frozenset({str})
_NUMBERS = frozenset({float, int})
_NUMBERS_OR_NONE = frozenset({float, int, _NONE})
_STR_OR_NONE = frozenset({str, _NONE})
_STR_INT_OR_NONE = frozenset({str, int, _NONE})
_BOOL_OR_NONE = frozenset({bool, _NONE})
_DICT_OR_NONE = frozenset({dict, _NONE})
_TAG_TYPES = frozenset({str, list, tuple, set, frozenset, _NONE})
_NO_TAGS: frozenset[str] = frozenset()
_BLANK = frozenset({""})
_EMPTY: dict[str, Any] = {}
_NUMERIC_FIELDS = ("created_at", "last_used", *_RANGES)
#: Inclusive bounds of the numeric columns; (0, 10] is [smallest float > 0, 10] for floats.
_FAST_BOUNDS: dict[str, tuple[float, float]] = {
    "score": (-_FLOAT_MAX, _FLOAT_MAX),
    **{name: (math.nextafter(low, math.inf) if open_low else low, high)
       for name, (low, high, open_low, _) in _RANGES.items()},
}
_TIMES = frozenset({"created_at", "last_used"})
_ONLY: dict[type, frozenset[type]] = {kind: frozenset({kind})
                                      for kind in (float, str, dict, Candidate)}
_NUMERIC = frozenset(_NUMERIC_FIELDS)
_INT_LABELS = frozenset({"key", "thread"})  # an int is read as its decimal string


class _Plan(NamedTuple):
    """How to read the shape fields of metadata with a given key set."""

    fields: tuple[tuple[str, tuple[str, ...]], ...]  # field, its keys in priority order
    unread: tuple[Any, ...]  # the keys that are no field's first key
    first: tuple[itemgetter[Any], ...]  # per field, the getter of its first key


_PLANS: dict[frozenset[Any], _Plan] = {}


def _plan(keys: frozenset[Any], reverse: dict[str, tuple[str, int]]) -> _Plan:
    """Which metadata keys to read for each field, in priority order, given the union of the
    metadata keys. Retrievers return the same key set over and over, so the default key
    table's plans are cached."""
    plan = _PLANS.get(keys) if reverse is _DEFAULT_REVERSE else None
    if plan is None:
        by_field: dict[str, list[tuple[int, str]]] = {}
        for key in keys:
            hit = reverse.get(key) if isinstance(key, str) else None
            if hit is not None:
                by_field.setdefault(hit[0], []).append((hit[1], key))
        fields = tuple((name, tuple(k for _, k in sorted(hits))) for name, hits in by_field.items())
        read = {keys[0] for _, keys in fields}
        plan = _Plan(fields, tuple(key for key in keys if key not in read),
                     tuple(itemgetter(keys[0]) for _, keys in fields))
        if reverse is _DEFAULT_REVERSE:
            if len(_PLANS) > 1_000:
                _PLANS.clear()
            _PLANS[keys] = plan
    return plan


def _types(values: Sequence[Any], usual: type) -> frozenset[type] | set[type]:
    """The types of ``values``. The usual case, all of type ``usual`` (one of :data:`_ONLY`), is
    found by counting a list of the types (compared by identity): cheaper than their set."""
    types = list(map(type, values))
    return _ONLY[usual] if types and types.count(usual) == len(types) else set(types)


def _fast_number(values: list[Any], low: float, high: float, ceiling: float = math.inf, *,
                 all_or_none: bool = False) -> np.ndarray | None:
    """The float64 column (NaN for None, values above ``ceiling`` lowered to it), or None unless
    every value is a plain int or float within [``low``, ``high``] (and, with ``all_or_none``,
    either every value or none is None). The checks are builtin passes: for the few dozen
    candidates of a rerank they cost less than numpy's dispatch."""
    kinds = _types(values, float)
    given = values
    if not kinds <= _NUMBERS:
        if not kinds <= _NUMBERS_OR_NONE:
            return None
        given = [v for v in values if v is not None]
        if all_or_none and given:
            return None
    top = -math.inf
    if given:
        try:  # min and max can step over a NaN; the sum cannot
            if not math.isfinite(sum(given)):
                return None
        except OverflowError:  # ints beyond the float range (a valid but huge sum defers too)
            return None
        # A finite sum of floats has finite terms, all within the float range: only bounds
        # narrower than that, or ints (which may exceed it), need the min and max.
        if int in kinds or low > -_FLOAT_MAX or high < _FLOAT_MAX or ceiling < math.inf:
            top = max(given)
            if min(given) < low or top > high:
                return None
    # fromiter is numpy's leanest conversion, but it cannot read None as NaN as np.array does
    column = (np.fromiter(values, np.float64, len(values)) if given is values
              else np.array(values, dtype=np.float64))
    if top > ceiling:
        np.minimum(column, ceiling, out=column)
    return column


def _fast_labels(values: list[Any], strings: list[Any], *,
                 ints: bool) -> tuple[str | None, ...] | None:
    """The column as the checked path reads it (an int as its decimal string, ``""`` as None),
    or None at a value of another type. Its strings join ``strings``, which the caller tests
    for encodability in one go."""
    kinds = _types(values, str)
    if ints and int in kinds:
        if not kinds <= _STR_INT_OR_NONE:
            return None
        values = [str(v) if type(v) is int else v for v in values]
    elif not kinds <= _STR_OR_NONE:
        return None
    strings.append([v for v in values if v is not None] if _NONE in kinds else values)
    return tuple(v or None for v in values) if "" in values else tuple(values)


def _all_encodable(strings: list[str], *, long: bool = False) -> bool:
    """Whether every string encodes as UTF-8. isascii reads a flag (no scan), so for an
    all-ASCII column one join tells, or for ``long`` strings each one's flag (a join would read
    them all); otherwise only the non-ASCII strings are encoded, not the column (a lone
    surrogate cannot pair up with a neighbour into anything encodable)."""
    ascii = all(map(str.isascii, strings)) if long else "".join(strings).isascii()
    return ascii or _encodable("".join(filterfalse(str.isascii, strings)))


def _fast_tags(values: list[Any], strings: list[Any]) -> tuple[frozenset[str], ...] | None:
    """The tags column as the checked path reads it, or None; its tags join ``strings``."""
    if not set(map(type, values)) <= _TAG_TYPES:
        return None
    tags = [t for v in values if v is not None for t in ((v,) if type(v) is str else v)]
    if not set(map(type, tags)) <= _STR:
        return None
    strings.append(tags)
    return tuple(_NO_TAGS if v is None else frozenset((v,) if type(v) is str else v) - _BLANK
                 for v in values)


#: The batch field of each shape field whose name differs (``kind`` fills ``kinds``).
_BATCH_FIELD = {"kind": "kinds", "source": "sources", "key": "keys", "thread": "threads"}

_ABSENT: dict[int, dict[str, Any]] = {}
_ABSENT_MAX_N = 2_048  # larger batches allocate their own: the cache stays a few MB at most


def _absent(n: int) -> dict[str, Any]:
    """Per batch field other than the items, ids, texts and scores, its column when no candidate
    gives the field (every flag empty), for ``n`` candidates: shared by every batch of ``n``
    candidates, so the caller fills a copy. The arrays are read-only: nothing writes into a
    batch, and a write would fail loudly instead of reaching another call."""
    absent = _ABSENT.get(n)
    if absent is None:
        nan = np.full(n, math.nan)
        false = np.zeros(n, dtype=bool)
        nan.flags.writeable = false.flags.writeable = False
        absent = {**dict.fromkeys(_NUMERIC_FIELDS, nan),
                  **dict.fromkeys(_BATCH_FIELD.values(), (None,) * n),
                  "tags": (_NO_TAGS,) * n, "superseded": false, "flags": ((),) * n}
        if n <= _ABSENT_MAX_N:
            if len(_ABSENT) >= 32:
                _ABSENT.clear()
            _ABSENT[n] = absent
    return absent


_GET_TOP = tuple(itemgetter(key) for key in ("id", "text", "score", "metadata"))


def _columns(items: Sequence[Any]) -> tuple[list[Any], list[Any], list[Any], list[Any]] | None:
    """``(ids, texts, scores, metadata)`` of plain dicts with only the four top-level keys, or of
    :class:`Candidate` objects; None for anything else."""
    if not items:
        return None
    kinds = _types(items, dict if type(items[0]) is dict else Candidate)
    if kinds == {dict}:
        if set(map(len, items)) == {4}:
            try:  # every dict has 4 keys, and these 4: no other key can be present
                ids, texts, scores, metas = (list(map(get, items)) for get in _GET_TOP)
                return ids, texts, scores, metas
            except KeyError:
                pass
        if not _TOP_LEVEL.issuperset(set().union(*items)):
            return None
        return ([d.get("id") for d in items], [d.get("text") for d in items],
                [d.get("score") for d in items], [d.get("metadata") for d in items])
    if kinds == {Candidate}:  # comprehensions read slots faster than attrgetter maps
        return ([c.id for c in items], [c.text for c in items], [c.score for c in items],
                [c.metadata for c in items])
    return None


def _uniform_columns(metas: list[dict[Any, Any]], plan: _Plan) -> dict[str, list[Any]] | None:
    """The shape columns when every metadata has exactly the keys of the first (checked here:
    same size, and every key of the first present), or None."""
    # Each metadata must hold every key of the first (the reads below fail otherwise), so none
    # is smaller: one total then proves them all the same size.
    if sum(map(len, metas)) != len(metas[0]) * len(metas):
        return None
    cols: dict[str, list[Any]] = {}
    try:
        for (name, keys), get in zip(plan.fields, plan.first):
            col = list(map(get, metas))
            for key in keys[1:]:
                col = [m[key] if v is None else v for v, m in zip(col, metas)]
            cols[name] = col
        if plan.unread:
            list(map(itemgetter(*plan.unread), metas))
    except KeyError:
        return None
    return cols


def _shape_columns(metas: list[Any], reverse: dict[str, tuple[str, int]]) -> dict[str, list[Any]] | None:
    """Per shape field present in any metadata, its column of raw values (None where absent)."""
    meta_types = _types(metas, dict)
    if not meta_types <= _DICT_OR_NONE:
        return None
    if _NONE in meta_types:
        metas = [_EMPTY if m is None else m for m in metas]
    else:
        uniform = _uniform_columns(metas, _plan(frozenset(metas[0]), reverse))
        if uniform is not None:
            return uniform
    cols: dict[str, list[Any]] = {}
    for name, keys in _plan(frozenset().union(*metas), reverse).fields:
        col = [m.get(keys[0]) for m in metas]
        for key in keys[1:]:
            col = [m.get(key) if v is None else v for v, m in zip(col, metas)]
        cols[name] = col
    return cols


def coerce_fast(items: Sequence[Any], *, now: float, future_tolerance_s: float = 300.0,
                reverse: dict[str, tuple[str, int]] = _DEFAULT_REVERSE) -> CandidateBatch | None:
    """The batch :func:`coerce_checked` would build, column by column, or None.

    Handles plain dicts and :class:`Candidate` objects whose values are plain ``str``, ``int``,
    ``float``, ``bool``, lists of ``str`` and ``None``; returns None (never raises) at anything
    else, including every value the checked path would reject or flag, so the checked path
    then decides.
    """
    columns = _columns(items)
    if columns is None:
        return None
    ids, texts, scores, metas = columns
    n = len(ids)
    # A blank string is empty or isspace (strip's whitespace is isspace's). An id is short: strip
    # finds both in one pass. A text is read no further than needed: its length sits in its
    # header and isspace stops at the first other character, where strip would also read the
    # end of every text (a cache miss each on a retriever's fresh results).
    if (_types(ids, str) != _STR or _types(texts, str) != _STR or not all(map(str.strip, ids))
            or not all(texts) or any(map(str.isspace, texts)) or len(set(ids)) != n):
        return None
    raw = _shape_columns(metas, reverse)
    if raw is None:
        return None
    score = _fast_number(scores, *_FAST_BOUNDS["score"], all_or_none=True)
    if score is None:
        return None
    latest = min(LATEST_S, now + future_tolerance_s)
    fields = _absent(n).copy()  # then each field some candidate gives replaces its column
    strings: list[Any] = [ids]
    for name, values in raw.items():
        column: np.ndarray | tuple[Any, ...] | None
        if name in _NUMERIC:  # a time up to the clock-skew tolerance ahead is read as now
            column = (_fast_number(values, EARLIEST_S, latest, now) if name in _TIMES
                      else _fast_number(values, *_FAST_BOUNDS[name]))
        elif name == "superseded":
            column = (np.array(values, dtype=bool) if set(map(type, values)) <= _BOOL_OR_NONE
                      else None)
        elif name == "tags":
            column = _fast_tags(values, strings)
        else:
            column = _fast_labels(values, strings, ints=name in _INT_LABELS)
        if column is None:
            return None
        fields[_BATCH_FIELD.get(name, name)] = column
    if not (_all_encodable(texts, long=True) and all(map(_all_encodable, strings))):
        return None
    return CandidateBatch(items=tuple(items), ids=tuple(ids), texts=tuple(texts), scores=score,
                          **fields)


# ------------------------------------------------------- the C kernel (a cache of the fast path)

#: The shape fields as the C kernel reads them: each metadata key's field and rank, packed as
#: ``field * 8 + rank``; one kind byte per field; the bounds of the numeric ones.
_C_REVERSE = {key: f * 8 + rank for f, name in enumerate(_FIELDS)
              for rank, key in enumerate(DEFAULT_FIELD_KEYS[name])}
_C_KIND = {**dict.fromkeys(_TIMES, "T"), **dict.fromkeys(_RANGES, "R"), "kind": "L",
           "source": "L", "key": "I", "thread": "I", "tags": "G", "superseded": "F"}
_C_KINDS = "".join(_C_KIND[name] for name in _FIELDS).encode("ascii")
_C_BOUNDS = tuple((EARLIEST_S, LATEST_S) if name in _TIMES else _FAST_BOUNDS.get(name, (0.0, 0.0))
                  for name in _FIELDS)
#: Per field, its row in the kernel's block of floats (0: not numeric; the scores are row 0).
_C_ROW = dict(zip([name for name in _FIELDS if _C_KIND[name] in "TR"], itertools.count(1)))


def coerce_c(items: Sequence[Any], *, now: float,
             future_tolerance_s: float = 300.0) -> CandidateBatch | None:
    """The batch :func:`coerce_checked` would build, from the C kernel
    (``heaprank._accel._kernels.coerce_columns``), or None: without the kernel, and wherever it
    defers (anything but clean :class:`Candidate` objects or plain dicts with clean plain
    values). One pass over the candidates in C; a property test holds it to the checked path."""
    if speedups is None:
        return None
    cols = speedups.coerce_columns(items, Candidate, _C_REVERSE, _C_KINDS, _C_BOUNDS, now,
                                   min(LATEST_S, now + future_tolerance_s), _NO_TAGS)
    if cols is None:
        return None
    stored, ids, texts, floats, present, columns = cols
    n = len(ids)
    block = np.frombuffer(floats, dtype=np.float64).reshape(-1, n)
    fields = _absent(n).copy()
    f = 0
    while present >> f:  # the fields some candidate gave
        if present >> f & 1:
            name = _FIELDS[f]
            row = _C_ROW.get(name)
            fields[_BATCH_FIELD.get(name, name)] = (
                block[row] if row is not None else np.frombuffer(columns[f], dtype=bool)
                if name == "superseded" else columns[f])
        f += 1
    fields.update(items=stored, ids=ids, texts=texts, scores=block[0])
    return CandidateBatch(**fields)
