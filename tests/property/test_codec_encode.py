"""The impression codec's ``encode`` against a frozen copy of the encoder it replaced.

Stored impressions are read back by other processes and other versions, so the bytes must not
change: ``_reference_encode`` is the encoder as it was before the hot path was restructured
(one bytes object per part, a numpy range scan then ``astype("<f4")``). On random impressions
(ids of every length and script, codebook and free-form slots, signal values of every kind of
double: NaN, infinities, past float32's range, subnormal), both give the same bytes, and
``Decoded`` reads them back.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank.errors import StateError
from heaprank.model.features import FIXED_SLOTS
from heaprank.model.questions import QUESTION_TYPES
from heaprank.state import codec

_HEADER = struct.Struct("<BBBHBd")
_F32_MAX = float(np.finfo(np.float32).max)


def _reference_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _reference_text(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return _reference_varint(len(encoded)) + encoded


def _reference_encode(*, qtype, time, time_explicit, doc_features, ids, slots, signal_names,
                      signals, verdicts=None) -> bytes:
    n, m = len(ids), len(signal_names)
    codebook = {s: i for i, s in enumerate(FIXED_SLOTS)}
    table: dict[str, int] = {}
    parts = []
    for doc_id, row in zip(ids, slots):
        codes = bytearray((len(row),))
        for slot in row:
            code = codebook.get(slot)
            if code is None:
                code = table.get(slot)
                if code is None:
                    code = table[slot] = 128 + len(table)
                    if code > 255:
                        raise StateError("impression: more than 128 distinct free-form slots")
            codes.append(code)
        parts.append(_reference_text(doc_id) + bytes(codes))
    if signals is None:
        values = np.zeros((n, m), dtype="<f4")
    else:
        wide = np.asarray(signals, dtype=np.float64)
        if (np.abs(wide) > _F32_MAX).any():
            with np.errstate(over="ignore"):
                values = wide.astype("<f4")
        else:
            values = wide.astype("<f4")
    if values.shape != (n, m):
        raise ValueError(f"impression signals: expected shape {(n, m)}, got {values.shape}")
    flags = (1 if time_explicit else 0) | (2 if doc_features else 0)
    head = _HEADER.pack(1, flags, QUESTION_TYPES.index(qtype), n, m, time)
    verdict_bytes = bytes(verdicts) if verdicts is not None else bytes(n)
    names = bytes(codec.SIGNAL_CODES.index(s) for s in signal_names)
    strings = bytes((len(table),)) + b"".join(_reference_text(s) for s in table)
    return b"".join((head, verdict_bytes, names, strings, *parts, values.tobytes()))


#: Every kind of double: the raw bits of random 64-bit patterns (NaN payloads, subnormals,
#: huge values), and the edges of float32's range.
doubles = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(0, 2**64 - 1).map(lambda b: float(np.array(b, dtype=np.uint64).view(np.float64))),
    st.sampled_from([0.0, -0.0, _F32_MAX, -_F32_MAX, 3.4028235677973366e38, 1.4e-45, 7e-46,
                     -7e-46, 1e300, -1e300]),
)
free_slots = st.sampled_from(["thread:s1", "tag:x", "lang:zoë", "prev:top1|odd", "ß" * 70])
rows = st.lists(st.one_of(st.sampled_from(FIXED_SLOTS), free_slots), max_size=6)
ids = st.text(min_size=1, max_size=80) | st.sampled_from(["é" * 70, "a" * 200, "doc-1"])


@st.composite
def impressions(draw: st.DrawFn) -> dict:
    n = draw(st.integers(0, 12))
    names = tuple(draw(st.lists(st.sampled_from(codec.SIGNAL_CODES), max_size=9)))
    as_tuples = draw(st.booleans())  # the reranker's rows are tuples; others may pass lists
    slot_rows = [tuple(r) if as_tuples else r for r in draw(st.lists(rows, min_size=n,
                                                                     max_size=n))]
    form = draw(st.sampled_from(["array", "lists", "none"]))
    values = [[draw(doubles) for _ in names] for _ in range(n)]
    signals = None if form == "none" else (np.array(values, dtype=np.float64).reshape(n, len(names))
                                           if form == "array" else values)
    return {"qtype": draw(st.sampled_from(QUESTION_TYPES)),
            "time": draw(st.floats(allow_nan=False, allow_infinity=False)),
            "time_explicit": draw(st.booleans()), "doc_features": draw(st.booleans()),
            "ids": tuple(draw(ids) for _ in range(n)), "slots": tuple(slot_rows),
            "signal_names": names, "signals": signals,
            "verdicts": draw(st.none() | st.lists(st.integers(0, 2), min_size=n, max_size=n))}


def encode(*, qtype, time, time_explicit, doc_features, ids, slots, signal_names, signals,
           verdicts=None) -> bytes:
    """``codec.encode`` called with the reference encoder's arguments."""
    return codec.encode(codec.Head(qtype, time, time_explicit, doc_features, signal_names), ids,
                        slots, signals, verdicts)


def _outcome(encode, imp: dict) -> bytes | tuple[str, str]:
    """The bytes, or the error raised (its type and message)."""
    try:
        return encode(**imp)
    except (ValueError, StateError) as exc:
        return type(exc).__name__, str(exc)


@given(impressions())
def test_encode_gives_the_frozen_encoders_bytes(imp):
    expected = _outcome(_reference_encode, imp)
    assert _outcome(encode, imp) == expected
    if not isinstance(expected, bytes):  # e.g. no items given as an empty list: no shape
        return
    # again with the same row objects: the codebook rows known by value now
    assert encode(**imp) == expected
    # and with equal rows that are other objects
    copies = tuple(tuple(list(r)) if isinstance(r, tuple) else list(r) for r in imp["slots"])
    assert encode(**{**imp, "slots": copies}) == expected
    back = codec.Decoded(expected)
    assert back.ids == imp["ids"]
    assert back.slots == tuple(tuple(r) for r in imp["slots"])


@given(impressions(), st.integers(1, 3))
def test_encode_refuses_a_wrong_shape_as_before(imp, extra):
    n, m = len(imp["ids"]), len(imp["signal_names"])
    wrong = np.zeros((n, m + extra))
    with pytest.raises(ValueError, match=r"expected shape") as raised:
        encode(**{**imp, "signals": wrong})
    with pytest.raises(ValueError) as expected:
        _reference_encode(**{**imp, "signals": wrong})
    assert str(raised.value) == str(expected.value)
