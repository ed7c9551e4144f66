"""Candidates: what a retriever returned, converted once at the boundary into arrays.

A candidate is a :class:`Candidate`, a mapping ``{"id", "text", "score", "metadata"}`` (the
shape fields of DESIGN.md section 3 may sit in ``metadata`` or at the top level), or any object
with a ``to_candidate()`` method. :func:`coerce_candidates` validates them and returns a
:class:`CandidateBatch` of numpy arrays; after that point the scoring code sees arrays only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union, runtime_checkable

import numpy as np

from ._time import to_epoch
from .errors import InputError

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

_TOP_LEVEL = {"id", "text", "score", "metadata"}


@dataclass(frozen=True, slots=True)
class Candidate:
    """One retrieved item. heaprank never stores it; the ``id`` is what learned stats hang on.

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


@dataclass(frozen=True, slots=True)
class CandidateBatch:
    """The validated candidates as parallel arrays (internal; one row per candidate)."""

    items: tuple[Candidate | Mapping[str, Any], ...]  # validated inputs, converted on demand
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

    def candidate(self, i: int) -> Candidate:
        """Candidate ``i`` as a :class:`Candidate`, its metadata a copy of the caller's."""
        item = self.items[i]
        if isinstance(item, Candidate):
            return item
        return Candidate(self.ids[i], self.texts[i], item.get("score"),
                         dict(item.get("metadata") or {}))

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        return tuple(self.candidate(i) for i in range(len(self.ids)))


def _to_candidate(item: object, where: str) -> Candidate:
    if isinstance(item, Candidate):
        return item
    if isinstance(item, Mapping):
        unknown = set(item) - _TOP_LEVEL - set(DEFAULT_FIELD_KEYS)
        if unknown:
            raise InputError(f"{where}: unknown field(s) {sorted(map(str, unknown))}; "
                             f"expected id, text, score, metadata or a shape field")
        meta = item.get("metadata", {})
        if meta is None:
            meta = {}
        if not isinstance(meta, Mapping):
            raise TypeError(f"{where}.metadata: expected a mapping, got {type(meta).__name__}")
        merged = dict(meta)
        merged.update({k: v for k, v in item.items() if k in DEFAULT_FIELD_KEYS})
        if "id" not in item:
            raise InputError(f"{where}.id: missing")
        if "text" not in item:
            raise InputError(f"{where}.text: missing")
        return Candidate(id=item["id"], text=item["text"], score=item.get("score"), metadata=merged)
    if isinstance(item, SupportsCandidate):
        out = item.to_candidate()
        if not isinstance(out, Candidate):
            raise TypeError(f"{where}: to_candidate() returned {type(out).__name__}, not Candidate")
        return out
    raise TypeError(f"{where}: expected a Candidate, a mapping or an object with to_candidate(), "
                    f"got {type(item).__name__}")


def _reverse_keys(field_keys: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, int]]:
    """metadata key -> (field, priority): lets one pass over a candidate's metadata find every
    shape field (the metadata is usually small; the key table is not)."""
    return {key: (name, rank) for name, keys in field_keys.items() for rank, key in enumerate(keys)}


_DEFAULT_REVERSE = _reverse_keys(DEFAULT_FIELD_KEYS)


def _shape_fields(meta: Mapping[str, Any], reverse: dict[str, tuple[str, int]]) -> dict[str, Any]:
    """The shape fields in ``meta``: for each field, the value of its highest-priority key that
    is present and not None."""
    found: dict[str, tuple[int, Any]] = {}
    for key, value in meta.items():
        hit = reverse.get(key)
        if hit is None or value is None:
            continue
        name, rank = hit
        if name not in found or rank < found[name][0]:
            found[name] = (rank, value)
    return {name: value for name, (_, value) in found.items()}


_Plan = tuple[tuple[str, tuple[str, ...]], ...]
_PLANS: dict[tuple[int, tuple[str, ...]], _Plan] = {}


def _plan(keys: tuple[str, ...], reverse: dict[str, tuple[str, int]]) -> _Plan:
    """Which metadata keys to read for each field, in priority order, for metadata with exactly
    these keys. Retrievers return the same key set over and over, so this is cached."""
    cache_key = (id(reverse), keys)
    plan = _PLANS.get(cache_key)
    if plan is None:
        by_field: dict[str, list[tuple[int, str]]] = {}
        for key in keys:
            hit = reverse.get(key)
            if hit is not None:
                by_field.setdefault(hit[0], []).append((hit[1], key))
        plan = tuple((name, tuple(k for _, k in sorted(hits))) for name, hits in by_field.items())
        if len(_PLANS) > 10_000:
            _PLANS.clear()
        _PLANS[cache_key] = plan
    return plan


def _shape_fields_planned(meta: dict[str, Any], reverse: dict[str, tuple[str, int]]) -> dict[str, Any]:
    """:func:`_shape_fields` for a plain dict, with the key plan cached per key set."""
    out: dict[str, Any] = {}
    for name, keys in _plan(tuple(meta), reverse):
        for key in keys:
            value = meta[key]
            if value is not None:
                out[name] = value
                break
    return out


class _Validator:
    """Collects one candidate's fields, raising or flagging bad values by ``on_invalid``."""

    def __init__(self, where: str, on_invalid: OnInvalid) -> None:
        self.where = where
        self.on_invalid = on_invalid
        self.flags: list[str] = []

    def bad(self, name: str, message: str) -> float:
        if self.on_invalid == "raise":
            raise InputError(f"{self.where}.{name}: {message}")
        self.flags.append(f"{name} {message}")
        return math.nan

    def number(self, name: str, value: Any, *, positive: bool = False, nonneg: bool = False) -> float:
        if value is None:
            return math.nan
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            if self.on_invalid == "raise":
                raise TypeError(f"{self.where}.{name}: expected a number, got {type(value).__name__}")
            return self.bad(name, f"not a number ({type(value).__name__})")
        try:
            out = float(value)
        except OverflowError:  # an int beyond the float range
            return self.bad(name, "must be finite, got an integer too large for a float")
        if not math.isfinite(out):
            return self.bad(name, f"must be finite, got {out!r}")
        if positive and out <= 0:
            return self.bad(name, f"must be > 0, got {out!r}")
        if nonneg and out < 0:
            return self.bad(name, f"must be >= 0, got {out!r}")
        return out

    def time(self, name: str, value: Any, now: float, tolerance_s: float) -> float:
        if value is None:
            return math.nan
        try:
            out = to_epoch(value, f"{self.where}.{name}")
        except (InputError, TypeError) as exc:
            if self.on_invalid == "raise":
                raise
            self.flags.append(f"{name} unparsable")
            del exc
            return math.nan
        if out > now + tolerance_s:
            if self.on_invalid == "raise":
                raise InputError(f"{self.where}.{name}: {value!r} is in the future "
                                 f"(now={now:.0f}); pass now= or on_invalid='neutral'")
            self.flags.append(f"{name} in the future, clamped")
            return now
        return min(out, now)

    def label(self, name: str, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise TypeError(f"{self.where}.{name}: expected str, got {type(value).__name__}")
        return value or None


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
        InputError: empty list, duplicate or empty id, empty text, NaN/inf score, negative
            importance, unparsable or future time (unless ``on_invalid="neutral"``).
        TypeError: a value of the wrong type (non-string id or text, say).
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, (Sequence, list, tuple)):
        if isinstance(items, Mapping) or isinstance(items, (str, bytes)):
            raise TypeError("candidates: expected a sequence of candidates, got "
                            f"{type(items).__name__}")
        items = list(items)
    if len(items) == 0:
        raise InputError("candidates: empty; pass at least one candidate")
    reverse = _DEFAULT_REVERSE if field_keys is DEFAULT_FIELD_KEYS else _reverse_keys(field_keys)
    fast = _coerce_clean(items, now + future_tolerance_s, now, reverse)
    if fast is not None:
        return fast
    return _coerce_checked(items, now, on_invalid, reverse, future_tolerance_s)


_NUMBER_TYPES = (float, int)
_CLEAN_KEYS = frozenset(_TOP_LEVEL)
_NONE_TYPE = type(None)


def _numbers(values: list[Any]) -> np.ndarray | None:
    """A float64 column (NaN for None) if every value is a plain finite int or float."""
    if not all(type(v) in (float, int, _NONE_TYPE) for v in values):
        return None
    try:
        col = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
    except OverflowError:  # an int beyond the float range: let the checked path name it
        return None
    present = [v is not None for v in values]
    if not np.isfinite(col[present]).all():
        return None
    return col


def _labels(values: list[Any]) -> tuple[str | None, ...] | None:
    if not all(type(v) in (str, _NONE_TYPE) for v in values):
        return None
    return tuple(v or None for v in values)


def _coerce_clean(items: Sequence[Any], latest: float, now: float,
                  reverse: dict[str, tuple[str, int]]) -> CandidateBatch | None:
    """The fast path for clean input (plain dicts or Candidates, plain values, nothing to flag).

    Returns None at the first thing it does not handle; the checked path then validates
    everything and raises (or flags) with the candidate and field named.
    """
    ids: list[Any] = []
    texts: list[Any] = []
    scores: list[Any] = []
    fields: list[dict[str, Any]] = []
    for item in items:
        kind = type(item)
        if kind is dict:
            if not item.keys() <= _CLEAN_KEYS:
                return None
            ids.append(item.get("id"))
            texts.append(item.get("text"))
            scores.append(item.get("score"))
            meta = item.get("metadata") or {}
        elif kind is Candidate:
            ids.append(item.id)
            texts.append(item.text)
            scores.append(item.score)
            meta = item.metadata
        else:
            return None
        if type(meta) is not dict:
            return None
        fields.append(_shape_fields_planned(meta, reverse) if meta else {})
    if not all(type(i) is str and i for i in ids) or len(set(ids)) != len(ids):
        return None
    if not all(type(t) is str and not t.isspace() and t for t in texts):
        return None
    score_col = _numbers(scores)
    if score_col is None or 0 < np.isnan(score_col).sum() < len(ids):
        return None
    n = len(ids)
    present = set().union(*fields)
    blank: list[Any] = [None] * n
    cols = {name: [f.get(name) for f in fields] if name in present else blank
            for name in DEFAULT_FIELD_KEYS}
    numeric: dict[str, np.ndarray] = {}
    for name in ("created_at", "last_used", "importance", "source_count", "confidence",
                 "version", "position"):
        col = _numbers(cols[name]) if name in present else np.full(n, math.nan)
        if col is None:
            return None
        numeric[name] = col
    for name in ("created_at", "last_used"):
        if name in present:
            if (numeric[name] > latest).any():
                return None
            numeric[name] = np.minimum(numeric[name], now)  # within the clock-skew tolerance
    if (numeric["importance"] <= 0).any() or (numeric["source_count"] < 0).any() \
            or (numeric["confidence"] < 0).any() or (numeric["confidence"] > 1).any():
        return None
    kinds, sources = _labels(cols["kind"]), _labels(cols["source"])
    if kinds is None or sources is None or "tags" in present:
        return None  # tags take the checked path
    return CandidateBatch(
        items=tuple(items), ids=tuple(ids), texts=tuple(texts), scores=score_col,
        created_at=numeric["created_at"], last_used=numeric["last_used"],
        importance=numeric["importance"], source_count=numeric["source_count"],
        confidence=numeric["confidence"], version=numeric["version"],
        position=numeric["position"], kinds=kinds, sources=sources,
        keys=tuple(None if k is None else str(k) for k in cols["key"]),
        threads=tuple(None if t is None else str(t) for t in cols["thread"]),
        tags=(frozenset(),) * n,
        superseded=np.array([bool(v) for v in cols["superseded"]], dtype=bool),
        flags=((),) * n)


def _coerce_checked(items: Sequence[Any], now: float, on_invalid: OnInvalid,
                    reverse: dict[str, tuple[str, int]], future_tolerance_s: float) -> CandidateBatch:
    """Validate candidate by candidate, raising or flagging with the field named."""
    converted: list[Candidate] = []
    seen: dict[str, int] = {}
    cols: dict[str, list[Any]] = {name: [] for name in (
        "scores", "created_at", "last_used", "importance", "source_count", "confidence",
        "version", "position", "kinds", "sources", "keys", "threads", "tags", "superseded",
        "flags")}
    for i, item in enumerate(items):
        where = f"candidates[{i}]"
        cand = _to_candidate(item, where)
        if not isinstance(cand.id, str):
            raise TypeError(f"{where}.id: expected str, got {type(cand.id).__name__}")
        if not cand.id:
            raise InputError(f"{where}.id: empty")
        where = f"candidates[{i}] (id {cand.id!r})"
        if cand.id in seen:
            raise InputError(f"{where}.id: duplicate of candidates[{seen[cand.id]}]")
        seen[cand.id] = i
        if not isinstance(cand.text, str):
            raise TypeError(f"{where}.text: expected str, got {type(cand.text).__name__}")
        check = _Validator(where, on_invalid)
        if not cand.text.strip():
            check.bad("text", "empty")
        if not isinstance(cand.metadata, Mapping):
            raise TypeError(f"{where}.metadata: expected a mapping, got "
                            f"{type(cand.metadata).__name__}")
        get = _shape_fields(cand.metadata, reverse).get
        cols["scores"].append(check.number("score", cand.score))
        cols["created_at"].append(check.time("created_at", get("created_at"), now,
                                             future_tolerance_s))
        cols["last_used"].append(check.time("last_used", get("last_used"), now,
                                            future_tolerance_s))
        cols["importance"].append(check.number("importance", get("importance"), positive=True))
        cols["source_count"].append(check.number("source_count", get("source_count"), nonneg=True))
        conf = check.number("confidence", get("confidence"), nonneg=True)
        if conf > 1:
            conf = check.bad("confidence", f"must be in [0, 1], got {conf!r}")
        cols["confidence"].append(conf)
        cols["version"].append(check.number("version", get("version")))
        cols["position"].append(check.number("position", get("position")))
        cols["kinds"].append(check.label("kind", get("kind")))
        cols["sources"].append(check.label("source", get("source")))
        key = get("key")
        cols["keys"].append(None if key is None else str(key))
        thread = get("thread")
        cols["threads"].append(None if thread is None else str(thread))
        tags = get("tags")
        if tags is None:
            tags = ()
        elif isinstance(tags, str):
            tags = (tags,)
        if not all(isinstance(t, str) for t in tags):
            raise TypeError(f"{where}.tags: expected strings")
        cols["tags"].append(frozenset(tags))
        cols["superseded"].append(bool(get("superseded")))
        cols["flags"].append(tuple(check.flags))
        converted.append(cand)
    scores = np.asarray(cols["scores"], dtype=np.float64)
    given = ~np.isnan(scores)
    invalid_scores = np.array([any(f.startswith("score") for f in fl) for fl in cols["flags"]])
    if given.any() and not (given | invalid_scores).all():
        missing = int(np.flatnonzero(~(given | invalid_scores))[0])
        raise InputError(f"candidates[{missing}].score: missing while other candidates have "
                         f"scores; give every candidate a score or none")
    f64 = lambda name: np.asarray(cols[name], dtype=np.float64)  # noqa: E731
    return CandidateBatch(
        items=tuple(converted),
        ids=tuple(c.id for c in converted),
        texts=tuple(c.text for c in converted),
        scores=scores,
        created_at=f64("created_at"),
        last_used=f64("last_used"),
        importance=f64("importance"),
        source_count=f64("source_count"),
        confidence=f64("confidence"),
        version=f64("version"),
        position=f64("position"),
        kinds=tuple(cols["kinds"]),
        sources=tuple(cols["sources"]),
        keys=tuple(cols["keys"]),
        threads=tuple(cols["threads"]),
        tags=tuple(cols["tags"]),
        superseded=np.asarray(cols["superseded"], dtype=bool),
        flags=tuple(cols["flags"]),
    )
