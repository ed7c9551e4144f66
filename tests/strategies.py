"""Hypothesis strategies for heaprank: candidates, retriever scores, queries, feedback sequences.

Scores are integers / 100 in a modest range, so scaling or shifting them never merges two
distinct values through floating-point noise alone (the invariants are about order, not ulps).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import numpy as np
from hypothesis import strategies as st

from heaprank import Candidate
from heaprank.config import DEFAULT_KIND_IMPORTANCE
from heaprank.scoring.candidates import DEFAULT_FIELD_KEYS, CandidateBatch, _absent

#: The fixed "now" of every generated candidate set (2025-06-15T15:06:40Z).
NOW = 1_750_000_000.0
DAY = 86_400.0

KINDS = sorted(DEFAULT_KIND_IMPORTANCE) + ["custom"]
SOURCES = ["maya", "assistant", "Zoë", "Москва"]
TEXTS = [
    "My flight to Lisbon leaves on March 3 at 10:40",
    "I prefer window seats",
    "Remember to call Zoë tomorrow",
    "The hotel costs $120 a night",
    "Встреча в Москва в понедельник",
    "会议在3月14日",
    "Is the museum open on Sundays?",
    "ok",
    "We talked about the weather and nothing else in particular for quite a while, then "
    "moved on to books, films, the neighbour's dog and the price of coffee in town",
]
QUERIES = [
    "When is my flight to Lisbon?",
    "Who is Zoë?",
    "Where did we stay?",
    "How many nights?",
    "How much was the hotel?",
    "What do I prefer?",
    "Why did we go?",
    "How do I get there?",
    "Is it open?",
    "tell me something",
    "",
    "the of and",
    "Где Москва?",
]

#: A retriever score: an integer / 100 in [-10, 10].
scores = st.integers(min_value=-1000, max_value=1000).map(lambda x: x / 100)

queries = st.one_of(st.sampled_from(QUERIES), st.text(max_size=40))

texts = st.one_of(st.sampled_from(TEXTS),
                  st.text(min_size=1, max_size=60).filter(lambda t: t.strip() != ""))


@st.composite
def metadata(draw: st.DrawFn, *, keys: bool = True) -> dict[str, Any]:
    """Valid shape metadata: every field optional."""
    meta: dict[str, Any] = {}
    if draw(st.booleans()):
        meta["kind"] = draw(st.sampled_from(KINDS))
    if draw(st.booleans()):
        meta["source"] = draw(st.sampled_from(SOURCES))
    if draw(st.booleans()):
        meta["created_at"] = NOW - draw(st.integers(min_value=0, max_value=400 * 24)) * 3600.0
    if draw(st.booleans()):
        meta["importance"] = draw(st.integers(min_value=1, max_value=50)) / 10
    if keys and draw(st.integers(0, 3)) == 0:
        meta["key"] = draw(st.sampled_from(["plan", "seat"]))
        if draw(st.booleans()):
            meta["version"] = draw(st.integers(min_value=1, max_value=5))
    if draw(st.integers(0, 4)) == 0:
        meta["source_count"] = draw(st.integers(min_value=1, max_value=20))
        if draw(st.booleans()):
            meta["confidence"] = draw(st.integers(min_value=0, max_value=10)) / 10
    return meta


@st.composite
def candidate_lists(draw: st.DrawFn, *, min_size: int = 1, max_size: int = 12,
                    scored: bool | None = True, with_metadata: bool = True,
                    keys: bool = True) -> list[dict[str, Any]]:
    """A list of candidate mappings with unique ids.

    ``scored``: True every candidate has a score, False none has, None either (all or none).
    """
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    if scored is None:
        scored = draw(st.booleans())
    out = []
    for i in range(n):
        cand: dict[str, Any] = {"id": f"d{i}", "text": draw(texts)}
        if scored:
            cand["score"] = draw(scores)
        if with_metadata:
            cand["metadata"] = draw(metadata(keys=keys))
        out.append(cand)
    return out


# Feedback sequences: (query index, shown candidate indices, used subset) over a small pool.
POOL = [
    {"id": f"p{i}", "text": TEXTS[i % len(TEXTS)], "score": float(10 - i),
     "metadata": {"kind": KINDS[i % len(KINDS)], "source": SOURCES[i % len(SOURCES)]}}
    for i in range(8)
]


@st.composite
def feedback_step(draw: st.DrawFn) -> tuple[str, str, int, list[int]]:
    """``(namespace, query, k, used ranks)``: one rerank of :data:`POOL` and its feedback."""
    namespace = draw(st.sampled_from(["alice", "bob", "carol"]))
    query = draw(st.sampled_from(QUERIES))
    k = draw(st.integers(min_value=1, max_value=len(POOL)))
    used = draw(st.lists(st.integers(min_value=0, max_value=k - 1), unique=True, max_size=k))
    return namespace, query, k, used


feedback_sequences = st.lists(feedback_step(), min_size=1, max_size=12)


# ----------------------------------------------------------------------- wild candidate input
# Everything a caller might hand over, valid or not: for proving the fast and the checked
# coercion paths agree. Small pools make duplicates, collisions and edge values frequent.

_ALIASES = sorted({key for keys in DEFAULT_FIELD_KEYS.values() for key in keys})
_TOP_FIELDS = sorted(DEFAULT_FIELD_KEYS)

wild_strings = st.one_of(
    st.sampled_from(["a", "b", "note", "fact", "", " ", "\t\n", "\ud800", "x\udfffy", "Zoë",
                     "2025-06-15T15:06:40Z", "false", "7"]),
    st.text(max_size=6),
)

wild_numbers = st.one_of(
    st.integers(min_value=-3, max_value=12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 0.0, -0.0, 10.0, 10.000001, 1e6, 10**400, -(10**400), 2**63 + 1,
                     math.nan, math.inf]),
    st.integers(min_value=-3, max_value=12).map(np.int64),
    st.floats(min_value=-5, max_value=20).map(np.float64),
    st.floats(min_value=-5, max_value=20, width=32).map(np.float32),
)

wild_times = st.one_of(
    st.integers(min_value=-400 * 24, max_value=24).map(lambda h: NOW + 3600.0 * h),
    st.integers(min_value=-400 * 24, max_value=24).map(lambda h: int(NOW) + 3600 * h),
    st.sampled_from([NOW * 1000, 4e12, 1e300, -1e300, -3e9, 7.3e9, NOW + 299, NOW + 301,
                     "2025-06-15T15:06:40Z", "2025-06-15 10:00", "1899-12-31T00:00:00Z",
                     "2199-12-31T23:59:59+00:00", "last tuesday"]),
    st.datetimes(min_value=datetime(1850, 1, 1), max_value=datetime(2250, 1, 1)),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 1, 1),
                 timezones=st.just(timezone.utc)),
)

wild_scalars = st.one_of(st.none(), st.booleans(), st.just(np.bool_(True)), wild_strings,
                         wild_numbers, wild_times)

wild_values = st.one_of(
    wild_scalars,
    st.lists(wild_strings, max_size=3),
    st.tuples(wild_strings),
    st.frozensets(st.sampled_from(["x", "y", ""]), max_size=2),
    st.lists(st.one_of(st.integers(0, 2), wild_strings), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), wild_strings, max_size=1),
)

wild_metadata = st.one_of(
    st.dictionaries(st.sampled_from(_ALIASES + ["extra", "url"]), wild_values, max_size=5),
    st.dictionaries(st.sampled_from(_ALIASES), wild_scalars, max_size=8),
    st.sampled_from([None, [], "", 0, False, {}, ()]),
)


class _Adapter:
    """An object with ``to_candidate()``, as a framework adapter would be."""

    def __init__(self, candidate: Any) -> None:
        self.candidate = candidate

    def to_candidate(self) -> Any:
        return self.candidate


@st.composite
def wild_candidate(draw: st.DrawFn) -> Any:
    """One item of any shape: a dict (maybe with top-level shape fields, maybe missing fields),
    a :class:`Candidate`, an adapter, or something that is not a candidate at all."""
    ident = draw(st.one_of(st.sampled_from(["a", "b", "c", "d"]), wild_strings,
                           st.sampled_from([None, 7, b"a"])))
    text = draw(st.one_of(st.sampled_from(TEXTS), wild_strings, st.sampled_from([None, 3])))
    score = draw(st.one_of(st.none(), wild_numbers, st.sampled_from([True, "0.5"])))
    meta = draw(wild_metadata)
    shape = draw(st.sampled_from(["dict", "dict", "dict", "candidate", "candidate", "adapter",
                                  "junk"]))
    if shape == "candidate":
        return Candidate(ident, text, score, meta)
    if shape == "adapter":
        return _Adapter(draw(st.sampled_from([Candidate(ident, text, score, meta), "nope"])))
    if shape == "junk":
        return draw(st.sampled_from([None, 3, "text", ["id", "text"]]))
    item: dict[Any, Any] = {"id": ident, "text": text, "score": score, "metadata": meta}
    for name in draw(st.lists(st.sampled_from(["id", "text", "score", "metadata"]), max_size=2)):
        item.pop(name, None)
    if draw(st.integers(0, 4)) == 0:
        item[draw(st.sampled_from(_TOP_FIELDS + ["bogus", 1]))] = draw(wild_values)
    return item


def clean_candidate(item: dict[str, Any], as_object: bool) -> Any:
    """A valid candidate mapping, or the same as a :class:`Candidate`."""
    if not as_object:
        return item
    return Candidate(item["id"], item["text"], item.get("score"), item.get("metadata", {}))


wild_candidate_lists = st.lists(wild_candidate(), min_size=1, max_size=5)

#: Valid values for every shape field, under any of its metadata keys.
_CLEAN_VALUES: dict[str, Any] = {
    "created_at": wild_times.filter(lambda t: isinstance(t, float) and -2.2e9 < t <= NOW + 300),
    "last_used": st.integers(0, 1000).map(lambda h: NOW - 3600 * h),
    "importance": st.sampled_from([0.1, 1, 2.5, 10]),
    "kind": st.sampled_from(KINDS + [""]),
    "source": st.sampled_from(SOURCES + [""]),
    "key": st.sampled_from(["plan", "seat", 7, ""]),
    "version": st.integers(-2, 5),
    "tags": st.sampled_from([None, "travel", ["a", "b"], ("x", ""), {"y"}, []]),
    "source_count": st.integers(0, 20),
    "confidence": st.sampled_from([0, 0.5, 1.0]),
    "thread": st.sampled_from(["s1", "s2", 3]),
    "position": st.integers(0, 40),
    "superseded": st.sampled_from([True, False, None]),
}


_EARLIEST, _LATEST = -2_208_988_800.0, 7_258_118_400.0  # 1900 and 2200, written out
_LABEL_EDGES = ["", " ", "\u3000", "\ud800", "ok\udc80", 0, 7, -1, True, 1.5, {"a": "b"}, ["x"]]
_NUMBER_EDGES = [0, 0.0, -0.0, 1, True, np.bool_(False), math.nan, math.inf, 10**400, "1"]
#: Per target, the values at the edge of what is valid (mixed with :data:`wild_values`).
EDGES: dict[str, list[Any]] = {
    "id": ["", " ", "\t", "\u3000", "\ud800", "d0", 0, None, b"d1"],
    "text": ["", " ", "\n\t", "\u2003", "\udfff", None, 0],
    "score": [*_NUMBER_EDGES, None, np.float32(1.5), np.int64(3)],
    "metadata": [None, [], "", 0, False, (), {"kind": None}, {1: "x"}],
    "created_at": [_EARLIEST, _EARLIEST - 1, _LATEST, NOW + 300, NOW + 300.5, NOW * 1000, -0.0,
                   True, math.nan, "2025-06-15T15:06:40Z", "1900-01-01T00:00:00Z", 10**400],
    "importance": [*_NUMBER_EDGES, 10, 10.0, 10.000000001, 1e-300, -1e-300],
    "confidence": [*_NUMBER_EDGES, 1, 1.0000001, -1e-300],
    "source_count": [*_NUMBER_EDGES, -1e-300, 1e308],
    "version": [*_NUMBER_EDGES, -(2**70), 2**1023],
    "position": [*_NUMBER_EDGES, -5, 2**64],
    "kind": _LABEL_EDGES,
    "source": _LABEL_EDGES,
    "key": _LABEL_EDGES,
    "thread": _LABEL_EDGES,
    "tags": [*_LABEL_EDGES, [""], ["a", ""], ("a", 1), {"a", "\ud800"}, frozenset(), []],
    "superseded": [True, False, None, "false", "", 0, 1, np.bool_(True), [], "true"],
}
EDGES["last_used"] = EDGES["created_at"]
#: Where :func:`near_clean_candidate_lists` may put a wild value.
WILD_TARGETS = sorted(EDGES)


@st.composite
def near_clean_candidate_lists(draw: st.DrawFn, target: str | None = None) -> list[Any]:
    """Valid candidates (dicts or :class:`Candidate` objects, one shape per list, every field
    under any of its keys) with one or two wild values put in at ``target`` (a top-level field
    or a metadata key; any of :data:`WILD_TARGETS` when None): the edge where a fast path is
    most tempted to accept what the checked path would not."""
    n = draw(st.integers(min_value=1, max_value=6))
    as_objects = draw(st.booleans())
    scored = draw(st.booleans())
    items: list[Any] = []
    for i in range(n):
        meta = {draw(st.sampled_from(DEFAULT_FIELD_KEYS[name])): draw(_CLEAN_VALUES[name])
                for name in draw(st.lists(st.sampled_from(_TOP_FIELDS), max_size=6, unique=True))}
        item: dict[str, Any] = {"id": f"d{i}", "text": draw(texts), "metadata": meta}
        if scored:
            item["score"] = draw(scores)
        items.append(item)
    for _ in range(draw(st.integers(1, 2))):
        where = target or draw(st.sampled_from(WILD_TARGETS))
        # three times in four an edge value, else anything at all
        value = draw(st.sampled_from(EDGES[where]) if draw(st.integers(0, 3)) else wild_values)
        item = items[draw(st.integers(0, n - 1))]
        if where in ("id", "text", "score", "metadata"):
            item[where] = value
        elif isinstance(item["metadata"], dict):
            item["metadata"][draw(st.sampled_from(DEFAULT_FIELD_KEYS[where]))] = value
    return [clean_candidate(item, as_objects) for item in items]


def batch_of(ids: Any, texts: Any, kinds: Any = None, sources: Any = None,
             tags: Any = None) -> CandidateBatch:
    """A batch of these columns as coercion makes them (every other field absent): what
    :meth:`FeatureSpace.rows` reads, built without coercing."""
    n = len(ids)
    fields = _absent(n).copy()
    fields.update(items=tuple({"id": d, "text": t} for d, t in zip(ids, texts)),
                  ids=tuple(ids), texts=tuple(texts), scores=np.full(n, math.nan))
    for name, column in (("kinds", kinds), ("sources", sources), ("tags", tags)):
        if column is not None:
            fields[name] = tuple(column)
    return CandidateBatch(**fields)
