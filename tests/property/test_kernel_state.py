"""The state stage's kernel (``heaprank._accel._state``) against its Python twin:
``encode_items`` gives the bytes ``codec.encode`` writes without it, and defers on what it does
not take."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from heaprank.model.features import FIXED_SLOTS
from heaprank.state import codec
from tests.property.kernels import stage_kernels

STATE = stage_kernels("state")

_IDS = st.text(min_size=1, max_size=200).filter(lambda s: "\ud800" not in s).map(
    lambda s: s.encode("utf-8", "replace").decode("utf-8", "replace"))
_ROWS = st.lists(st.sampled_from(FIXED_SLOTS), max_size=12).map(tuple)
_VALUES = st.one_of(st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, 1e300,
                                                  -1e300, 5e-324, -0.0, 3.5e38]))
_HEAD = codec.Head("what", 1_700_000_000.5, True, False, ("relevance", "age_days", "rules"))


@given(items=st.lists(st.tuples(_IDS, _ROWS), max_size=20), data=st.data())
def test_the_kernels_impression_bytes_are_the_python_encoders(items, data):
    ids = tuple(i for i, _ in items)
    slots = tuple(row for _, row in items)
    m = len(_HEAD.signal_names)
    signals = np.array(data.draw(st.lists(_VALUES, min_size=len(ids) * m,
                                          max_size=len(ids) * m)),
                       dtype=np.float64).reshape(len(ids), m)
    with mock.patch.object(codec, "encode_kernel", None):
        expected = codec.encode(_HEAD, ids, slots, signals)  # (and the rows now cached)
    assert STATE.encode_items(ids, slots, codec._FIXED_ROWS, signals, m) is not None
    assert codec.encode(_HEAD, ids, slots, signals) == expected


_FREE_ROWS = st.lists(st.one_of(st.sampled_from(FIXED_SLOTS),
                                st.sampled_from(["source:ann", "source:bo", "tag:x", "kind:q%"])),
                      max_size=12).map(tuple)


@given(items=st.lists(st.tuples(_IDS, _FREE_ROWS), max_size=20))
def test_impressions_with_free_form_slots_encode_to_the_python_encoders_bytes(items):
    """Rows with slots outside the codebook: the kernel over the impression's own rows' codes
    (numbered in the order they first come) writes what the Python pass writes."""
    ids = tuple(i for i, _ in items)
    slots = tuple(row for _, row in items)
    signals = np.arange(len(ids) * 3, dtype=np.float64).reshape(len(ids), 3)
    with mock.patch.object(codec, "encode_kernel", None):
        expected = codec.encode(_HEAD, ids, slots, signals)
    with mock.patch.object(codec, "encode_kernel", mock.Mock(wraps=STATE.encode_items)) as kernel:
        assert codec.encode(_HEAD, ids, slots, signals) == expected
    assert kernel.call_args.args[2] is not codec._FIXED_ROWS or all(
        row in codec._FIXED_ROWS for row in slots)  # a free-form row: its own codes


def test_the_kernels_impression_bytes_defer_on_what_they_do_not_take():
    class Slot(str):
        pass

    row = ("kind:note", "num:no")
    rows = {row: codec._row_codes(row, {})}
    signals, kernel = np.zeros((1, 2)), STATE.encode_items
    assert kernel(("a",), (row,), rows, signals, 2) is not None
    assert kernel(("a",), (row,), rows, signals, 3) is None  # another column count
    assert kernel(("a",), (("kind:note",),), rows, signals, 2) is None  # a row not in the table
    assert kernel(("a",), ((Slot("kind:note"), "num:no"),), rows, signals, 2) is None
    assert kernel(("\ud800",), (row,), rows, signals, 2) is None  # a lone surrogate
    assert kernel([("a")], (row,), rows, signals, 2) is None  # ids not a tuple
    assert kernel(("a",), [row], rows, signals, 2) is None  # slots not a tuple
    assert kernel(("a",), (row,), rows, signals.astype(np.float32), 2) is None
    assert kernel(("a",), (row,), rows, np.zeros((2, 2)), 2) is None  # another item count
    assert kernel(("a",) * 257, (row,) * 257, rows, np.zeros((257, 2)), 2) is None


def test_only_rows_of_plain_strings_are_kept_for_the_kernel():
    """The kernel looks rows up in the codec's table: a key holding a str subclass could run
    Python code (its __eq__) in the middle of that lookup."""
    class Slot(str):
        pass

    codec._row_codes((Slot("kind:fact"), Slot("date:yes")), {})
    assert all(type(row) is tuple and all(type(slot) is str for slot in row)
               for row in codec._FIXED_ROWS)
