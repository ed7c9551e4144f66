"""Candidates: what a retriever returned, converted once at the boundary into arrays.

A candidate is a :class:`Candidate`, a mapping ``{"id", "text", "score", "metadata"}`` (the
shape fields below may also sit at the top level of the mapping, where they win over
``metadata``), or any object with a ``to_candidate()`` method. :func:`coerce_candidates`
validates them and returns a :class:`CandidateBatch` of arrays; after that point the scoring
code sees arrays only.

There is one specification of a valid candidate, :func:`coerce_checked`, which goes candidate
by candidate and names the candidate and field of the first bad value. Two fast paths build the
same batch for clean input and return ``None`` (never raise) at anything they are not sure of,
so the checked path decides: the C kernel of this stage
(``heaprank._accel._candidates.coerce_columns``, through :func:`coerce_c`) for
:class:`Candidate` objects, and :func:`coerce_plain` in Python for plain dicts and
:class:`Candidate` objects alike (what runs without the kernel, or where it defers). Property
tests hold both to the checked path's batches.

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

Label values (``kind``, ``source``, ``key``, ``thread``, ``tags``) must be encodable as UTF-8;
``kind``, ``source`` and each tag hold at most :data:`~heaprank._checks.MAX_LABEL_CHARS`
characters (they become stored feature names).
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union, runtime_checkable

import numpy as np

from .._accel import kernels
from .._checks import check_id, preview
from .._time import EARLIEST_S, LATEST_S, to_epoch
from ..errors import InputError, InputTypeError
from . import fields as fv
from .fields import _RANGES, MAX_IMPORTANCE, FieldChecker, OnInvalid, encodable, long_label

__all__ = ["DEFAULT_FIELD_KEYS", "MAX_IMPORTANCE", "Candidate", "CandidateBatch", "CandidateLike",
           "OnInvalid", "SupportsCandidate", "coerce_c", "coerce_candidates", "coerce_checked",
           "coerce_plain"]

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

_FIELDS = tuple(DEFAULT_FIELD_KEYS)
_TOP_LEVEL = frozenset({"id", "text", "score", "metadata"})
_ALLOWED_TOP_LEVEL = _TOP_LEVEL | frozenset(_FIELDS)


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
    # A snapshot (one C-level copy): another thread may change the caller's list meanwhile.
    if type(items) is list:
        items = tuple(items)
    elif type(items) is not tuple:  # the usual case skips the ABC test
        if isinstance(items, (str, bytes, Mapping)):
            raise InputTypeError(f"candidates: expected a sequence of candidates, got "
                                 f"{type(items).__name__}")
        try:
            items = tuple(items)
        except TypeError:
            raise InputTypeError(f"candidates: expected a sequence of candidates, got "
                                 f"{type(items).__name__}") from None
    if len(items) == 0:
        raise InputError("candidates: empty; pass at least one candidate")
    now = to_epoch(now, "now")
    if field_keys is DEFAULT_FIELD_KEYS:
        built = coerce_c(items, now=now, future_tolerance_s=future_tolerance_s)
        if built is None:
            built = coerce_plain(items, now=now, future_tolerance_s=future_tolerance_s)
        if built is not None:
            return built
        reverse = _DEFAULT_REVERSE
    else:
        reverse = _reverse_keys(field_keys)
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


def _copy(value: Any) -> Any:
    """A mapping's shallow copy (anything else as it is: the checks name it)."""
    return dict(value) if isinstance(value, Mapping) else value


def _parts(item: object, where: str) -> tuple[Candidate | Mapping[str, Any], Any, Any, Any, Any,
                                              dict[str, Any]]:
    """``(stored item, id, text, score, metadata, top-level shape fields)`` of one input."""
    # Read from snapshots, as the list itself: another thread may change a dict meanwhile.
    if isinstance(item, Candidate):
        return item, item.id, item.text, item.score, _copy(item.metadata), {}
    if isinstance(item, Mapping):
        fields = dict(item)
        unknown = set(fields) - _ALLOWED_TOP_LEVEL
        if unknown:
            raise InputError(f"{where}: unknown field(s) {sorted(map(str, unknown))}; "
                             f"expected id, text, score, metadata or a shape field")
        for required in ("id", "text"):
            if required not in fields:
                raise InputError(f"{where}.{required}: missing")
        top = {k: v for k, v in fields.items() if k in DEFAULT_FIELD_KEYS and v is not None}
        return item, fields["id"], fields["text"], fields.get("score"), \
            _copy(fields.get("metadata")), top
    if isinstance(item, SupportsCandidate):
        out = item.to_candidate()
        if not isinstance(out, Candidate):
            raise InputTypeError(f"{where}: to_candidate() returned {type(out).__name__}, "
                                 f"not Candidate")
        return _parts(out, where)
    raise InputTypeError(f"{where}: expected a Candidate, a mapping or an object with "
                         f"to_candidate(), got {type(item).__name__}")


def _shape_row(check: FieldChecker, score: Any, values: Mapping[str, Any], now: float,
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
        if not encodable(text):
            raise InputError(f"{where}.text: contains a lone surrogate (not encodable as UTF-8)")
        if not isinstance(meta, (Mapping, type(None))):
            raise InputTypeError(f"{where}.metadata: expected a mapping, got {type(meta).__name__}")
        located = _located_fields(meta or {}, reverse)
        check = FieldChecker(where, on_invalid, {**{name: f"metadata.{key}" for name, (key, _) in
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


# ------------------------------------------------- the fast Python path (a cache of the checked path)

def coerce_plain(items: Sequence[Any], *, now: float,
                 future_tolerance_s: float = 300.0) -> CandidateBatch | None:
    """The batch :func:`coerce_checked` would build, in fewer steps, or None (the checked path
    then runs): for plain dicts with only the keys id, text, score and metadata, and
    :class:`Candidate` objects, whose id and text are clean str, score a finite int or float
    on every candidate or none, and metadata None or a dict of clean values. Only the fields
    some candidate gives get a column of their own; the others share the absent ones."""
    n = len(items)
    latest = min(LATEST_S, now + future_tolerance_s)
    ids: list[str] = []
    texts: list[str] = []
    scores: list[float] = []
    given: dict[str, list[Any]] = {}  # per field some candidate gives, its column
    cid: Any
    text: Any
    score: Any
    meta: Any
    for i, item in enumerate(items):
        if type(item) is Candidate:
            cid, text, score, meta = item.id, item.text, item.score, item.metadata
        elif type(item) is dict and item.keys() <= _TOP_LEVEL:
            get = item.get
            cid, text, score, meta = get("id"), get("text"), get("score"), get("metadata")
        else:
            return None
        if not (fv.plain_text(cid) and fv.plain_text(text)):
            return None
        ids.append(cid)
        texts.append(text)
        if score is not None:
            x = fv.plain_number(score)
            if x is None:
                return None
            scores.append(x)
        if meta is None:
            continue
        if type(meta) is not dict:
            return None
        for name, (_, value) in _located_fields(meta, _DEFAULT_REVERSE).items():
            made = fv.plain_value(name, value, now, latest)
            if made is fv.DEFER:
                return None
            column = given.get(name)
            if column is None:
                column = given[name] = list(_absent(n)[_BATCH_FIELD.get(name, name)])
            column[i] = made
    if len(set(ids)) != n or (scores and len(scores) != n):
        return None  # a duplicate id, or scores on some candidates only
    fields = _absent(n).copy()
    for name, column in given.items():
        kind = fv.PLAIN_CHECK[name]
        fields[_BATCH_FIELD.get(name, name)] = (
            np.array(column, dtype=np.float64) if kind in ("time", "ranged") else
            np.array(column, dtype=bool) if kind == "flag" else tuple(column))
    fields.update(items=items if type(items) is tuple else tuple(items), ids=tuple(ids),
                  texts=tuple(texts),
                  scores=np.array(scores, dtype=np.float64) if scores else np.full(n, math.nan))
    return CandidateBatch(**fields)


# ------------------------------------------------------- the C kernel (a cache of the checked path)

_NO_TAGS: frozenset[str] = frozenset()
_NUMERIC_FIELDS = ("created_at", "last_used", *_RANGES)
_TIMES = frozenset({"created_at", "last_used"})
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


#: The shape fields as the C kernel reads them: each metadata key's field and rank, packed as
#: ``field * 8 + rank``; one kind byte per field (``-``: the kernel defers when it is given:
#: tags and flags are left to :func:`coerce_plain`); the bounds of the numeric ones.
_C_REVERSE = {key: f * 8 + rank for f, name in enumerate(_FIELDS)
              for rank, key in enumerate(DEFAULT_FIELD_KEYS[name])}
_C_KIND = {**dict.fromkeys(_TIMES, "T"), **dict.fromkeys(_RANGES, "R"), "kind": "L",
           "source": "L", "key": "L", "thread": "L", "tags": "-", "superseded": "-"}
_C_KINDS = "".join(_C_KIND[name] for name in _FIELDS).encode("ascii")
_C_BOUNDS = tuple((EARLIEST_S, LATEST_S) if name in _TIMES else fv.BOUNDS.get(name, (0.0, 0.0))
                  for name in _FIELDS)
#: The bits of ``present`` (fields some candidate gave) of the labels whose length is capped
_LABEL_BITS = sum(1 << _FIELDS.index(name) for name in ("kind", "source", "tags"))
#: Per field, its row in the kernel's block of floats (0: not numeric; the scores are row 0).
_C_ROW = dict(zip([name for name in _FIELDS if _C_KIND[name] in "TR"], itertools.count(1)))
#: The kernel reads a Candidate's four slots by their member descriptors' offsets.
_C_SLOTS = tuple(Candidate.__dict__[name] for name in ("id", "text", "score", "metadata"))
_KERNEL = kernels("candidates")


def coerce_c(items: Sequence[Any], *, now: float,
             future_tolerance_s: float = 300.0) -> CandidateBatch | None:
    """The batch :func:`coerce_checked` would build, from the C kernel
    (``heaprank._accel._candidates.coerce_columns``), or None: without the kernel, and wherever
    it defers (anything but clean :class:`Candidate` objects whose metadata gives numbers and
    str labels only). One pass over the candidates in C; a property test holds it to the
    checked path."""
    if _KERNEL is None:
        return None
    cols = _KERNEL.coerce_columns(items, _C_SLOTS, _C_REVERSE, _C_KINDS, _C_BOUNDS, now,
                                   min(LATEST_S, now + future_tolerance_s))
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
            fields[_BATCH_FIELD.get(name, name)] = block[row] if row is not None else columns[f]
        f += 1
    if present & _LABEL_BITS and long_label(
            itertools.chain(fields["kinds"], fields["sources"]), fields["tags"]):
        return None  # the checked path names the label over the cap
    fields.update(items=stored, ids=ids, texts=texts, scores=block[0])
    return CandidateBatch(**fields)
