"""The compact impression formats (format 3, what the Redis backend stores, and format 2 before
it) read back as the impression they were made from: every id, slot, verdict and header field
exactly, and each signal value as float16 keeps it, or float32 in a column where float16 would
lose precision."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from heaprank.records import Impression
from heaprank.state import codec

from .test_codec_encode import impressions

#: ids that share long prefixes, as an application's usually do
prefixed_ids = st.lists(st.sampled_from(["user03/m00027", "user03/m00019", "user03/m1", "é",
                                         "éa", "ü" * 40, "x"]), min_size=1, max_size=12)


def _impression(imp: dict) -> Impression:
    n, m = len(imp["ids"]), len(imp["signal_names"])
    signals = np.zeros((n, m)) if imp["signals"] is None else np.asarray(imp["signals"], float)
    return Impression(recall_id="r", namespace="n", qtype=imp["qtype"], time=imp["time"],
                      time_explicit=imp["time_explicit"], ids=imp["ids"],
                      slots=tuple(tuple(r) for r in imp["slots"]),
                      doc_features=imp["doc_features"], signal_names=imp["signal_names"],
                      signals=signals.reshape(n, m), verdicts=tuple(imp["verdicts"] or ()))


def _as_stored(column: np.ndarray) -> np.ndarray:
    """A column as format 2 keeps it: float16, unless a finite non-zero value lies outside
    float16's normal range (then float32, as format 1 keeps every value)."""
    size = np.abs(column)
    with np.errstate(invalid="ignore"):
        lossy = (np.isfinite(size) & (size != 0) & ((size > 65504) | (size < 2.0 ** -14))).any()
    with np.errstate(over="ignore"):
        return column.astype(np.float32 if lossy else np.float16).astype(np.float64)


def _check(imp: Impression, version: int = codec.COMPACT_VERSION) -> bytes:
    body = codec.encode_compact(imp, version)
    back = codec.decode_impression("r", "n", body)
    wide = codec.decode_impression("r", "n", codec.encode_impression(imp))
    assert body[0] == version
    assert (back.ids, back.slots, back.verdicts, back.signal_names) == (
        wide.ids, wide.slots, wide.verdicts, wide.signal_names)
    assert (back.qtype, back.time, back.time_explicit, back.doc_features) == (
        wide.qtype, wide.time, wide.time_explicit, wide.doc_features)
    got = np.array(back.signals, dtype=np.float64).reshape(imp.signals.shape)
    for j in range(imp.signals.shape[1]):
        assert np.array_equal(got[:, j], _as_stored(imp.signals[:, j]), equal_nan=True)
    assert codec.verdicts_of(body) == wide.verdicts
    return body


@given(impressions())
def test_compact_reads_back_as_the_impression(imp):
    _check(_impression(imp))


@given(impressions())
def test_format_2_bodies_still_read_back(imp):
    """Bodies written before format 3 (by rows) read back alike, verdicts at the same offset."""
    _check(_impression(imp), codec.COMPACT_ROWS_VERSION)


@given(impressions(), st.lists(st.sampled_from(["kind:note", "kind:fact", "len:<=10", "q:no"]),
                               min_size=1, max_size=6))
def test_a_slot_column_of_one_code_is_stored_once(imp, common):
    """Slots the shown items all share by position cost one byte, not one per item; rows of
    several lengths are kept by row."""
    n = max(len(imp["ids"]), 1)
    ids = tuple(f"d{i}" for i in range(n))
    rows = tuple((*common, f"own{i}") for i in range(n))
    made = _impression({**imp, "ids": ids, "slots": rows, "signals": None, "verdicts": None,
                        "signal_names": ()})
    body = _check(made)
    assert len(body) < len(codec.encode_compact(made, codec.COMPACT_ROWS_VERSION)) + 2 - \
        (n - 1) * len(common)
    ragged = _impression({**imp, "ids": ids, "slots": tuple(rows[i][:1 + i % 2] for i in range(n)),
                          "signals": None, "verdicts": None, "signal_names": ()})
    _check(ragged)


@given(impressions(), prefixed_ids)
def test_ids_sharing_prefixes_read_back_whole(imp, ids):
    n = len(ids)
    made = _impression({**imp, "ids": tuple(ids), "slots": (("kind:note",),) * n,
                        "signals": None, "verdicts": None})
    body = _check(made)  # (+ 4: the value masks; + 1: format 3's slot column mask)
    assert len(body) <= len(codec.encode_impression(made)) + n + 5


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1,
                max_size=12))
def test_a_column_of_one_value_is_stored_once(values):
    n = len(values)
    imp = _impression({"qtype": "other", "time": 1.0, "time_explicit": False,
                       "doc_features": False, "ids": tuple(f"d{i}" for i in range(n)),
                       "slots": ((),) * n, "signal_names": ("relevance", "rules"),
                       "signals": np.column_stack([values, np.ones(n)]), "verdicts": None})
    body = _check(imp)
    # relevance varies (n values of 2 or 4 bytes), rules is one float16: 1.0 once
    assert body.endswith(np.float16(1.0).tobytes())


def test_the_stored_values_keep_a_relative_error_of_at_most_2_to_the_minus_11():
    rng = np.random.default_rng(0)
    values = rng.uniform(2.0 ** -14, 65504.0, size=(10, 3)) * rng.choice([-1, 1], size=(10, 3))
    imp = _impression({"qtype": "other", "time": 1.0, "time_explicit": False,
                       "doc_features": False, "ids": tuple(f"d{i}" for i in range(10)),
                       "slots": ((),) * 10, "signal_names": ("relevance", "recency", "rules"),
                       "signals": values, "verdicts": None})
    got = np.array(codec.decode_impression("r", "n", codec.encode_compact(imp)).signals)
    assert np.all(np.abs(got - values) <= 2.0 ** -11 * np.abs(values))
