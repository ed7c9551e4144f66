"""The signals stage's kernels (``heaprank._accel._signals``) against the numpy lines: the
same bits, or a deferral."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.kernels import stage_kernels

SIGNALS = stage_kernels("signals")


#: Scores that make the normalisation's edges: signed zeros, ties, huge spans, subnormals.
_SCORES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-1e3, 1e3),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 1e-300, 5e-324, 1e300, -1e300, 1.7e308, 0.1, 0.3]))


def _bits(array: np.ndarray) -> list[int]:
    return np.ascontiguousarray(array, dtype=np.float64).view(np.int64).tolist()


@settings(max_examples=1000)
@given(scores=st.lists(st.one_of(_SCORES, st.just(math.nan)), min_size=0, max_size=60),
       kind=st.sampled_from(["similarity", "distance"]),
       floor=st.sampled_from([0.0, 0.02, 0.5, 1e-13, 1e-12, 0.999]))
def test_the_kernels_relevance_is_the_numpy_relevance_to_the_bit(scores, kind, floor):
    """The usual case (no NaN, a finite span) in one C pass gives numpy's bits, signed zeros
    and the rounding to 12 decimals included; anything else (a NaN, a span past the float
    range) is left to the numpy lines. (Infinite scores never get here: coercion refuses them.)"""
    from unittest import mock

    from heaprank.scoring import signals as sig
    s = np.array(scores, dtype=np.float64)
    made = SIGNALS.relevance(s, kind == "distance", floor)
    if not scores:
        assert made is None
        return
    with mock.patch.object(sig, "relevance_kernel", None):
        expected = sig.relevance(s, kind=kind, floor=floor, rank_tau=5.0)
    usual = not np.isnan(s).any() and math.isfinite(float(s.max()) - float(s.min()))
    if usual:
        assert made is not None and _bits(np.frombuffer(made)) == _bits(expected)
        assert _bits(sig.relevance(s, kind=kind, floor=floor, rank_tau=5.0)) == _bits(expected)
    else:
        assert made is None


def test_the_kernels_relevance_defers_on_what_it_does_not_take():
    kernel = SIGNALS.relevance
    assert kernel(np.arange(3.0)[::2], False, 0.0) is None  # not contiguous
    assert kernel(np.arange(3), False, 0.0) is None  # int64
    assert kernel(np.arange(3.0), 0, 0.0) is None  # not a bool
    assert kernel(np.arange(3.0), False, 0) is None  # not a float
    assert kernel([1.0, 2.0], False, 0.0) is None  # not a buffer
    assert kernel(np.array([1.0, math.inf]), False, 0.0) is None  # an infinite span
    assert kernel(np.array([-1.7e308, 1.7e308]), True, 0.0) is None  # a span past the range


_AGES = st.one_of(st.floats(allow_nan=False), st.just(math.nan), st.sampled_from(
    [0.0, -0.0, -1.0, 1.0, 86400.0, 1e308, -1e308, 5e-324, 3.3e10]))


@settings(max_examples=1000)
@given(ages=st.lists(_AGES, max_size=60),
       half_life=st.sampled_from([1.0, 86400.0, 30 * 86400.0, 1e-300, 1e300, 7.5]),
       floor=st.sampled_from([0.0, 0.05, 0.5, 1e-301, 1e-300, 0.999]))
def test_the_kernels_recency_is_the_numpy_recency_to_the_bit(ages, half_life, floor):
    """Both C passes around numpy's exp2 give the numpy lines' bits: negative ages clamped,
    NaN ages neutral, the 1e-300 floor of a zero floor."""
    from unittest import mock

    from heaprank.scoring import signals as sig
    age = np.array(ages, dtype=np.float64)
    made = sig.recency(age, half_life_s=half_life, floor=floor)
    # (numpy warns of an overflow past the float range where the kernel does not; the bits
    # are the same)
    with mock.patch.object(sig, "halvings_kernel", None), np.errstate(all="ignore"):
        expected = sig.recency(age, half_life_s=half_life, floor=floor)
    assert _bits(made) == _bits(expected)
    powers = SIGNALS.halvings(age, half_life)
    assert powers is not None and len(powers) == 8 * len(ages)
    assert SIGNALS.recency_from(powers, floor) is True


def test_the_kernels_recency_defers_on_what_it_does_not_take():
    halvings, recency_from = SIGNALS.halvings, SIGNALS.recency_from
    assert halvings(np.arange(4.0)[::2], 1.0) is None  # not contiguous
    assert halvings(np.arange(4.0), 1) is None  # an int half-life
    assert recency_from(bytearray(12), 0.0) is None  # not whole floats
    assert recency_from(bytes(16), 0.0) is None  # not a bytearray
    assert recency_from(bytearray(16), 0) is None  # an int floor
