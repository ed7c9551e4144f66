"""Candidates: conversion at the boundary, and bad input named by field (or neutralised)."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np
import pytest

from heaprank import Candidate, Config, HeapRankError, InputError, Inputs, Reranker, Scoring
from heaprank.config import RECENCY_EVERY_QUESTION
from heaprank.errors import InputTypeError
from heaprank.scoring.candidates import DEFAULT_FIELD_KEYS, coerce_candidates

NOW = 1_750_000_000.0
OK = {"id": "ok", "text": "A fine memory", "score": 1.0}


@pytest.fixture()
def rr() -> Reranker:
    return Reranker()


@pytest.fixture()
def lenient() -> Reranker:
    # recency on every question: the clamped age is explained
    return Reranker(config=Config(inputs=Inputs(on_invalid="neutral"),
                                  scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION)))


def cand(**fields):
    base = {"id": "x", "text": "Some memory text", "score": 0.5}
    base.update(fields)
    return base


# ------------------------------------------------------------------------------ conversion

def test_candidate_objects_mappings_and_adapters_are_equivalent(rr):
    class Node:
        def to_candidate(self) -> Candidate:
            return Candidate("c", "Lunch with Zoë on Friday", 0.2, {"kind": "episode"})

    items = [
        Candidate("a", "My flight to Lisbon is on March 3", 0.9, {"kind": "fact"}),
        {"id": "b", "text": "I prefer the aisle", "score": 0.5, "kind": "preference"},
        Node(),
    ]
    batch = coerce_candidates(items, now=NOW)
    assert batch.ids == ("a", "b", "c")
    assert batch.kinds == ("fact", "preference", "episode")
    assert batch.scores.tolist() == [0.9, 0.5, 0.2]
    assert rr.rerank("When is my flight?", items, now=NOW).ids[0] == "a"


def test_any_iterable_of_candidates_is_accepted():
    batch = coerce_candidates(({"id": f"g{i}", "text": "t"} for i in range(3)), now=NOW)
    assert batch.ids == ("g0", "g1", "g2")
    assert np.isnan(batch.scores).all()


@pytest.mark.parametrize("key, field, value, expected", [
    ("created_at", "created_at", NOW - 10, NOW - 10),
    ("timestamp", "created_at", "2025-06-15T15:06:30Z", NOW - 10),
    ("last_accessed_at", "last_used", NOW - 5, NOW - 5),
    ("__last_accessed__", "last_used", NOW - 5, NOW - 5),
    ("importance", "importance", 2, 2.0),
    ("turn", "position", 7, 7.0),
])
def test_metadata_aliases_fill_numeric_fields(key, field, value, expected):
    batch = coerce_candidates([{"id": "a", "text": "t", "metadata": {key: value}}], now=NOW)
    assert getattr(batch, field)[0] == expected


@pytest.mark.parametrize("key, attr, expected", [
    ("type", "kinds", "note"), ("speaker", "sources", "note"), ("session", "threads", "note"),
    ("key", "keys", "note"),
])
def test_metadata_aliases_fill_label_fields(key, attr, expected):
    batch = coerce_candidates([{"id": "a", "text": "t", "metadata": {key: "note"}}], now=NOW)
    assert getattr(batch, attr) == (expected,)


def test_first_alias_wins_and_none_values_are_skipped():
    meta = {"created_at": None, "timestamp": NOW - 7, "last_used": NOW - 3,
            "last_accessed_at": NOW - 100}
    batch = coerce_candidates([{"id": "a", "text": "t", "metadata": meta}], now=NOW)
    assert batch.created_at[0] == NOW - 7
    assert batch.last_used[0] == NOW - 3


def test_top_level_shape_fields_override_metadata():
    item = {"id": "a", "text": "t", "kind": "decision", "metadata": {"kind": "note"}}
    assert coerce_candidates([item], now=NOW).kinds == ("decision",)


def test_tags_accept_a_single_string_or_a_list():
    batch = coerce_candidates([{"id": "a", "text": "t", "metadata": {"tags": "travel"}},
                               {"id": "b", "text": "t", "metadata": {"tags": ["x", "y"]}}],
                              now=NOW)
    assert batch.tags == (frozenset({"travel"}), frozenset({"x", "y"}))


def test_timestamps_within_tolerance_count_as_now():
    batch = coerce_candidates([cand(metadata={"created_at": NOW + 299})], now=NOW)
    assert batch.created_at[0] == NOW


# ------------------------------------------------------------------------------ bad input

BAD = [
    pytest.param([cand(score=math.nan)], {}, InputError, r"candidates\[0\].*score: must be finite",
                 id="nan-score"),
    pytest.param([cand(score=math.inf)], {}, InputError, r"score: must be finite", id="inf-score"),
    pytest.param([cand(score=-math.inf)], {}, InputError, r"score", id="neg-inf-score"),
    pytest.param([cand(score=10**400)], {}, InputError, r"score: must be finite",
                 id="int-overflow-score"),
    pytest.param([cand(score="0.5")], {}, TypeError, r"score: expected a number", id="str-score"),
    pytest.param([cand(metadata={"importance": -1})], {}, InputError,
                 r"importance: must be in \(0, 10\], got -1.0", id="negative-importance"),
    pytest.param([cand(metadata={"importance": 0})], {}, InputError, r"importance", id="zero-imp"),
    pytest.param([cand(metadata={"created_at": "last tuesday"})], {}, InputError,
                 r"created_at: cannot parse 'last tuesday'", id="unparsable-time"),
    pytest.param([cand(metadata={"created_at": "2024-13-45"})], {}, InputError, r"created_at",
                 id="impossible-date"),
    pytest.param([cand(metadata={"created_at": NOW + 301})], {}, InputError,
                 r"created_at: .* is in the future", id="future-time"),
    pytest.param([cand(metadata={"last_accessed_at": "2099-01-01T00:00:00Z"})], {}, InputError,
                 r"metadata\.last_accessed_at \(last_used\): .* is in the future",
                 id="future-last-used"),
    pytest.param([cand(metadata={"created_at": math.nan})], {}, InputError,
                 r"created_at: time must be finite", id="nan-time"),
    pytest.param([cand(id="a"), cand(id="a")], {}, InputError,
                 r"candidates\[1\] \(id 'a'\)\.id: duplicate of candidates\[0\]", id="dup-ids"),
    pytest.param([cand(text="")], {}, InputError, r"text: empty", id="empty-text"),
    pytest.param([cand(text="  \n\t")], {}, InputError, r"text: empty", id="blank-text"),
    pytest.param([cand(text=None)], {}, TypeError, r"text: expected str", id="none-text"),
    pytest.param([cand(id=7)], {}, TypeError, r"candidates\[0\]\.id: expected str, got int",
                 id="int-id"),
    pytest.param([cand(id=None)], {}, TypeError, r"\.id: expected str", id="none-id"),
    pytest.param([cand(id="")], {}, InputError, r"\.id: empty", id="empty-id"),
    pytest.param([], {}, InputError, r"candidates: empty", id="no-candidates"),
    pytest.param("abc", {}, TypeError, r"candidates: expected a sequence", id="str-candidates"),
    pytest.param({"id": "a", "text": "t"}, {}, TypeError, r"candidates: expected a sequence",
                 id="mapping-candidates"),
    pytest.param([42], {}, TypeError, r"candidates\[0\]: expected a Candidate", id="int-item"),
    pytest.param([OK], {"k": 0}, InputError, r"k: must be from 1 to 65535, got 0", id="k-zero"),
    pytest.param([OK], {"k": -3}, InputError, r"k: must be from 1 to 65535, got -3", id="k-negative"),
    pytest.param([OK], {"k": 2.5}, TypeError, r"k: expected int, got float", id="k-float"),
    pytest.param([OK], {"k": "3"}, TypeError, r"k: expected int", id="k-str"),
    pytest.param([OK], {"k": True}, TypeError, r"k: expected int, got bool", id="k-bool"),
    pytest.param([OK], {"namespace": ""}, InputError, r"namespace", id="empty-namespace"),
    pytest.param([OK], {"namespace": "*"}, InputError, r"namespace", id="star-namespace"),
    pytest.param([OK], {"namespace": None}, TypeError, r"namespace: expected str",
                 id="none-namespace"),
    pytest.param([cand(bogus=1)], {}, InputError,
                 r"candidates\[0\]: unknown field\(s\) \['bogus'\]",
                 id="unknown-field"),
    pytest.param([{"text": "t"}], {}, InputError, r"candidates\[0\]\.id: missing", id="no-id"),
    pytest.param([{"id": "a"}], {}, InputError, r"candidates\[0\]\.text: missing", id="no-text"),
    pytest.param([cand(id="a", score=1.0), {"id": "b", "text": "t"}], {}, InputError,
                 r"candidates\[1\]\.score: missing while other candidates have scores",
                 id="mixed-scored"),
    pytest.param([cand(metadata=[1, 2])], {}, TypeError, r"metadata: expected a mapping",
                 id="list-metadata"),
    pytest.param([cand(metadata={"kind": 3})], {}, TypeError, r"kind: expected str", id="int-kind"),
    pytest.param([cand(metadata={"tags": [1]})], {}, TypeError, r"tags\[0\]: expected str, got int",
                 id="int-tags"),
    pytest.param([cand(metadata={"confidence": 1.5})], {}, InputError, r"confidence: must be in",
                 id="confidence"),
    pytest.param([cand(metadata={"source_count": -2})], {}, InputError, r"source_count",
                 id="negative-source-count"),
    pytest.param([cand(metadata={"created_at": True})], {}, TypeError, r"created_at",
                 id="bool-time"),
    pytest.param([cand(metadata={"created_at": [2024]})], {}, TypeError, r"created_at",
                 id="list-time"),
]


@pytest.mark.parametrize("candidates, kwargs, exc, match", BAD)
def test_bad_input_raises_naming_the_field(rr, candidates, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        rr.rerank("When is it?", candidates, now=NOW, **kwargs)


def test_input_error_is_a_value_error():
    assert issubclass(InputError, ValueError)


def test_bad_query_type_raises(rr):
    with pytest.raises(TypeError, match="query: expected str"):
        rr.rerank(None, [OK], now=NOW)


# ------------------------------------------------------------------- on_invalid="neutral"

NEUTRALISED = [
    pytest.param([cand(id="x", score=math.nan), cand(id="y", score=1.0)], "score must be finite",
                 id="nan-score"),
    pytest.param([cand(id="x", score=math.inf), cand(id="y", score=1.0)], "score must be finite",
                 id="inf-score"),
    pytest.param([cand(id="x", metadata={"importance": -1})], "importance must be in (0, 10]",
                 id="negative-importance"),
    pytest.param([cand(id="x", metadata={"created_at": "last tuesday"})], "created_at unparsable",
                 id="unparsable-time"),
    pytest.param([cand(id="x", metadata={"created_at": NOW + 86_400})],
                 "created_at in the future, clamped", id="future-time"),
    pytest.param([cand(id="x", text="")], "text empty", id="empty-text"),
    pytest.param([cand(id="x", score="high")], "score not a number", id="str-score"),
    pytest.param([cand(id="x", metadata={"confidence": 7})], "confidence must be in [0, 1]",
                 id="confidence"),
    pytest.param([cand(id="x", score=10**400), cand(id="y", score=1.0)], "score must be finite",
                 id="int-overflow"),
]


@pytest.mark.parametrize("candidates, flag", NEUTRALISED)
def test_neutral_mode_gives_finite_scores_and_flags_in_explain(lenient, candidates, flag):
    ranking = lenient.rerank("When is my flight to Lisbon?", candidates, now=NOW)
    assert sorted(ranking.ids) == sorted(c["id"] for c in candidates)
    for r in ranking:
        assert math.isfinite(r.score) and r.score > 0
        assert all(math.isfinite(v) and v > 0 for v in r.signals.values())
    flagged = next(r for r in ranking if r.id == "x")
    assert flag in flagged.explain()
    assert any(flag in f for f in flagged.flags)


def test_neutral_mode_gives_neutral_signals(lenient):
    ranking = lenient.rerank("When is my flight to Lisbon?", [
        cand(id="x", score=math.nan, metadata={"importance": -1, "created_at": "garbage",
                                                "kind": "fact"}),
        cand(id="y", score=1.0), cand(id="z", score=0.0)], now=NOW)
    x = next(r for r in ranking if r.id == "x")
    assert x.signals["relevance"] == pytest.approx(lenient.config.scoring.relevance_floor)
    assert x.signals["importance"] == 1.0  # the kind prior of "fact"
    assert x.signals["recency"] == 1.0  # unknown age is neutral


def test_neutral_mode_future_time_is_clamped_to_age_zero(lenient):
    r = lenient.rerank("When is my flight to Lisbon?",
                       [cand(metadata={"created_at": NOW + 10 * 86_400})], now=NOW)[0]
    assert r.signals["recency"] == 1.0
    assert "age 0.0d" in r.explain()


@pytest.mark.parametrize("candidates, exc", [
    ([cand(id="a"), cand(id="a")], InputError),
    ([cand(id=3)], TypeError),
    ([], InputError),
    ([cand(id="a", score=1.0), {"id": "b", "text": "t"}], InputError),
    ([cand(bogus=True)], InputError),
])
def test_neutral_mode_still_rejects_what_cannot_be_neutralised(lenient, candidates, exc):
    with pytest.raises(exc):
        lenient.rerank("When?", candidates, now=NOW)


def test_every_score_invalid_in_neutral_mode_ranks_by_position(lenient):
    ranking = lenient.rerank("When is my flight to Lisbon?",
                             [cand(id="a", score=math.nan), cand(id="b", score=math.inf)],
                             now=NOW)
    assert ranking.ids == ["a", "b"]
    assert all(math.isfinite(r.score) for r in ranking)


def test_datetime_metadata_is_accepted():
    aware = datetime(2025, 6, 15, 15, 6, 30, tzinfo=timezone.utc)
    naive = datetime(2025, 6, 15, 15, 6, 30)
    batch = coerce_candidates([cand(id="a", metadata={"created_at": aware}),
                               cand(id="b", metadata={"created_at": naive})], now=NOW)
    assert batch.created_at.tolist() == [NOW - 10, NOW - 10]


# ------------------------------------------------------------------------ typed metadata

def meta_of(**metadata):
    return [{"id": "x", "text": "Some memory text", "metadata": metadata}]


TYPED_ERRORS = [
    pytest.param({"superseded": "false"}, InputTypeError, r"\.metadata\.superseded: expected bool, got str",
                 id="superseded-str"),
    pytest.param({"superseded": 1}, InputTypeError, r"\.metadata\.superseded: expected bool, got int",
                 id="superseded-int"),
    pytest.param({"tags": {"a": "b"}}, InputTypeError,
                 r"\.metadata\.tags: expected a str or a list of str, got dict", id="tags-dict"),
    pytest.param({"tags": ["ok", "\ud800"]}, InputError, r"\.metadata\.tags\[1\]: contains a lone surrogate",
                 id="tags-surrogate"),
    pytest.param({"key": {"a": 1}}, InputTypeError, r"\.metadata\.key: expected str or int, got dict",
                 id="key-dict"),
    pytest.param({"key": 1.5}, InputTypeError, r"\.metadata\.key: expected str or int, got float",
                 id="key-float"),
    pytest.param({"key": True}, InputTypeError, r"\.metadata\.key: expected str or int, got bool",
                 id="key-bool"),
    pytest.param({"thread": ["s1"]}, InputTypeError, r"\.metadata\.thread: expected str or int, got list",
                 id="thread-list"),
    pytest.param({"session": None, "thread": 2.0}, InputTypeError, r"\.metadata\.thread: expected str or int",
                 id="thread-float"),
    pytest.param({"kind": 3}, InputTypeError, r"\.metadata\.kind: expected str, got int", id="kind-int"),
    pytest.param({"speaker": b"maya"}, InputTypeError,
                 r"\.metadata\.speaker \(source\): expected str, got bytes",
                 id="source-bytes"),
    pytest.param({"importance": 1e6}, InputError,
                 r"\.metadata\.importance: must be in \(0, 10\], got 1000000.0",
                 id="importance-1e6"),
    pytest.param({"importance": True}, InputTypeError, r"\.metadata\.importance: expected a number, got bool",
                 id="importance-bool"),
    pytest.param({"created_at": 4e12}, InputError, r"\.metadata\.created_at: .*looks like milliseconds",
                 id="created-ms"),
    pytest.param({"last_used": 1e300}, InputError, r"\.metadata\.last_used: 1e\+300 is not a plausible time",
                 id="last-used-1e300"),
    pytest.param({"timestamp": "1850-01-01"}, InputError,
                 r"\.metadata\.timestamp \(created_at\): .*not a plausible time",
                 id="created-1850"),
] + [
    pytest.param({name: "bad\ud800"}, InputError,
                 rf"\.metadata\.{field}: contains a lone surrogate", id=f"{name}-surrogate")
    for name, field in (("kind", "kind"), ("source", "source"), ("key", "key"), ("thread", "thread"))
]


@pytest.mark.parametrize("metadata, exc, match", TYPED_ERRORS)
def test_typed_metadata_errors_name_the_candidate_and_field(metadata, exc, match):
    with pytest.raises(exc, match=r"^candidates\[0\] \(id 'x'\)" + match):
        coerce_candidates(meta_of(**metadata), now=NOW)
    with pytest.raises(HeapRankError):
        coerce_candidates(meta_of(**metadata), now=NOW)


@pytest.mark.parametrize("metadata, exc, match", TYPED_ERRORS)
def test_typed_metadata_errors_are_neutralised_and_flagged_in_lenient_mode(metadata, exc, match):
    batch = coerce_candidates(meta_of(**metadata), now=NOW, on_invalid="neutral")
    field = next(name for name, keys in DEFAULT_FIELD_KEYS.items()
                 for key in keys if metadata.get(key) is not None)
    assert len(batch.flags[0]) == 1 and batch.flags[0][0].startswith(field)
    assert (batch.kinds, batch.sources, batch.keys, batch.threads, batch.tags) == \
        ((None,), (None,), (None,), (None,), (frozenset(),))
    assert not batch.superseded[0]
    for column in (batch.created_at, batch.last_used, batch.importance):
        assert np.isnan(column[0])


@pytest.mark.parametrize("metadata, attr, expected", [
    ({"superseded": True}, "superseded", [True]),
    ({"superseded": np.bool_(True)}, "superseded", [True]),
    ({"superseded": False}, "superseded", [False]),
    ({"key": 7}, "keys", ("7",)),
    ({"key": np.int64(7)}, "keys", ("7",)),
    ({"key": ""}, "keys", (None,)),
    ({"thread": 3}, "threads", ("3",)),
    ({"session": "s1"}, "threads", ("s1",)),
    ({"kind": ""}, "kinds", (None,)),
    ({"tags": ("a", "b", "")}, "tags", (frozenset({"a", "b"}),)),
    ({"tags": {"a"}}, "tags", (frozenset({"a"}),)),
    ({"tags": ""}, "tags", (frozenset(),)),
    ({"importance": 10}, "importance", [10.0]),
    ({"importance": 1e-9}, "importance", [1e-9]),
])
def test_typed_metadata_accepted_forms(metadata, attr, expected):
    got = getattr(coerce_candidates(meta_of(**metadata), now=NOW), attr)
    assert (got.tolist() if isinstance(got, np.ndarray) else got) == expected


@pytest.mark.parametrize("metadata", [[], "", 0, False, (), "kind=fact"])
def test_metadata_that_is_not_a_mapping_is_rejected_by_every_path(metadata):
    items = [{"id": "a", "text": "t", "score": 1.0, "metadata": metadata}]
    for call in (lambda: coerce_candidates(items, now=NOW),
                 lambda: coerce_candidates(items, now=NOW, on_invalid="neutral"),
                 lambda: coerce_candidates([Candidate("a", "t", 1.0, metadata)], now=NOW)):
        with pytest.raises(InputTypeError, match=r"candidates\[0\] \(id 'a'\)\.metadata: expected a mapping"):
            call()


@pytest.mark.parametrize("ident, match", [
    (" ", r"candidates\[0\]\.id: whitespace only"),
    ("\u3000\t", r"candidates\[0\]\.id: whitespace only"),
    ("doc\ud800", r"candidates\[0\]\.id: contains a lone surrogate"),
])
def test_blank_and_unencodable_ids_are_rejected_even_in_lenient_mode(ident, match):
    for mode in ("raise", "neutral"):
        with pytest.raises(InputError, match=match):
            coerce_candidates([{"id": ident, "text": "t"}], now=NOW, on_invalid=mode)


def test_unencodable_text_is_rejected_even_in_lenient_mode():
    for mode in ("raise", "neutral"):
        with pytest.raises(InputError, match=r"\(id 'a'\)\.text: contains a lone surrogate"):
            coerce_candidates([{"id": "a", "text": "caf\udce9"}], now=NOW, on_invalid=mode)


def test_every_sqlite_bound_label_is_checked_before_any_backend_sees_it():
    rr = Reranker(state="memory://")
    for field in ("kind", "source", "key", "thread", "tags"):
        with pytest.raises(InputError, match=rf"\.{field}(\[0\])?: contains a lone surrogate"):
            rr.rerank("q", [{"id": "a", "text": "t", "metadata": {field: "x\ud800"}}], now=NOW)


def test_candidate_view_is_built_on_demand_with_top_level_fields_merged():
    item = {"id": "a", "text": "t", "score": 2.0, "kind": "fact", "metadata": {"kind": "note", "x": 1}}
    batch = coerce_candidates([item], now=NOW)
    assert batch.items[0] is item
    assert batch.candidate(0) == Candidate("a", "t", 2.0, {"kind": "fact", "x": 1})
    assert item["metadata"] == {"kind": "note", "x": 1}  # the caller's dict is not touched


def test_metadata_key_sets_of_one_size_but_different_keys_are_all_read():
    # the columnar path reads same-size metadata by the first one's keys: it must notice that
    # the second has "kind" where the first has a second created_at alias
    items = [{"id": "a", "text": "t", "metadata": {"created_at": NOW - 5, "timestamp": NOW - 9}},
             {"id": "b", "text": "t", "metadata": {"created_at": NOW - 5, "kind": "fact"}}]
    batch = coerce_candidates(items, now=NOW)
    assert batch.kinds == (None, "fact")
    assert batch.created_at.tolist() == [NOW - 5, NOW - 5]


def retrieved(n: int) -> list[Candidate]:
    """``n`` candidates shaped like a retriever's output: one metadata key set for all, a
    non-ASCII speaker among them."""
    return [Candidate(f"m{i}", f"Memory {i} about the trip", 1.0 - i / (2 * n),
                      {"created_at": NOW - 3600.0 * i, "kind": "fact",
                       "source": ("tomás", "assistant")[i % 2]})
            for i in range(n)]


def test_absent_columns_are_read_only_so_no_write_reaches_another_batch():
    first, second = (coerce_candidates(retrieved(5), now=NOW) for _ in range(2))
    for batch in (first, second):
        for column in (batch.last_used, batch.importance, batch.source_count, batch.confidence,
                       batch.version, batch.position):
            assert column.dtype == np.float64 and np.isnan(column).all()
        assert batch.superseded.dtype == bool and not batch.superseded.any()
        assert batch.keys == batch.threads == (None,) * 5
        assert batch.tags == (frozenset(),) * 5 and batch.flags == ((),) * 5
    # The C pass shares one absent column between batches, read-only; the Python pass builds
    # one per batch. Either way a write to one batch's column never reaches another's.
    for name, value in (("importance", 2.0), ("superseded", True)):
        column = getattr(first, name)
        if np.shares_memory(column, getattr(second, name)):
            with pytest.raises(ValueError, match="read-only"):
                column[0] = value
        else:
            column[0] = value
    assert np.isnan(second.importance).all() and not second.superseded.any()
    # the columns the candidates did give are their own, and writable
    assert not np.shares_memory(first.created_at, second.created_at)
    assert first.created_at.flags.writeable


@pytest.mark.parametrize("n", [1, 50, 2_049])  # 2,049: beyond the shared absent columns' cap
def test_retrieved_candidates_convert_alike_at_any_size(n):
    batch = coerce_candidates(retrieved(n), now=NOW)
    assert batch.ids == tuple(f"m{i}" for i in range(n))
    assert batch.created_at.tolist() == [NOW - 3600.0 * i for i in range(n)]
    assert batch.sources == tuple(("tomás", "assistant")[i % 2] for i in range(n))
    assert batch.kinds == ("fact",) * n
    assert np.isnan(batch.importance).all() and len(batch.importance) == n


def test_a_lone_surrogate_among_non_ascii_labels_is_named():
    items = retrieved(50)
    bad = items[7]
    items[7] = Candidate(bad.id, bad.text, bad.score, {**bad.metadata, "source": "tom\udce1s"})
    with pytest.raises(InputError, match=r"^candidates\[7\] \(id 'm7'\)\.metadata\.source: "
                                         r"contains a lone surrogate"):
        coerce_candidates(items, now=NOW)


@pytest.mark.parametrize("now, exc, match", [
    (NOW * 1000, InputError, r"^now: .* looks like milliseconds"),
    (math.nan, InputError, r"^now: time must be finite"),
    (math.inf, InputError, r"^now: time must be finite"),
    (True, InputTypeError, r"^now: expected epoch seconds"),
    (-3e9, InputError, r"^now: .* is not a plausible time"),
])
def test_a_bad_now_is_named_whatever_its_type(now, exc, match):
    with pytest.raises(exc, match=match):
        coerce_candidates([OK], now=now)


@pytest.mark.parametrize("now", [NOW, int(NOW), np.float64(NOW), "2025-06-15T15:06:40Z",
                                 datetime.fromtimestamp(NOW, timezone.utc)])
def test_now_in_any_accepted_form_is_the_same_time(now):
    batch = coerce_candidates([cand(metadata={"created_at": NOW + 10})], now=now)
    assert batch.created_at.tolist() == [NOW]  # clamped to now: the same now in every form


@pytest.mark.parametrize("items", [iter([OK]), (OK,), [OK]])
def test_any_iterable_of_candidates_is_read(items):
    assert coerce_candidates(items, now=NOW).ids == ("ok",)


@pytest.mark.parametrize("items", [OK, "ok", b"ok", 3])
def test_a_non_sequence_is_named(items):
    with pytest.raises(InputTypeError, match=r"^candidates: expected a sequence of candidates"):
        coerce_candidates(items, now=NOW)
