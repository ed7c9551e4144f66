"""The rank stage's kernels (``heaprank._accel._rank``) against numpy: the same bits, or a
deferral; and a rerank takes every kernel of the rank and signals stages."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.kernels import stage_kernels
from tests.property.test_kernel_signals import _SCORES, _bits
from tests.strategies import NOW

RANK = stage_kernels("rank")
stage_kernels("signals")


_COLUMN = st.one_of(st.floats(allow_nan=True), st.just("array"))


@given(n=st.integers(0, 12), kinds=st.lists(_COLUMN, max_size=8), data=st.data())
def test_the_kernels_columns_are_the_numpy_matrix(n, kinds, data):
    from unittest import mock

    from heaprank.scoring import rank as reranker
    values = tuple(np.array(data.draw(st.lists(_SCORES | st.just(math.nan), min_size=n,
                                                 max_size=n)), dtype=np.float64)
                   if kind == "array" else kind for kind in kinds)
    at = data.draw(st.none() | st.lists(st.integers(0, max(n - 1, 0)), max_size=10).map(
        lambda xs: np.array(xs if n else [], dtype=np.intp)))
    made = reranker.matrix(n, values, at)
    with mock.patch.object(reranker, "columns_kernel", None):
        expected = reranker.matrix(n, values, at)
    assert made.shape == expected.shape and _bits(made.ravel()) == _bits(expected.ravel())
    assert RANK.columns(n, values, at) is not None


def test_the_kernels_columns_defer_on_what_they_do_not_take():
    kernel, col = RANK.columns, np.arange(4.0)
    assert kernel(4, (col, 1.0), None) is not None
    assert kernel(3, (col,), None) is None  # another length
    assert kernel(4, (col, 1), None) is None  # an int
    assert kernel(4, (col[::2],), None) is None  # not contiguous
    assert kernel(4, (np.arange(4),), None) is None  # int64
    assert kernel(4, (col,), np.array([0, 4])) is None  # a position out of range
    assert kernel(4, (col,), np.array([-1])) is None
    assert kernel(4, [col], None) is None  # not a tuple


@settings(max_examples=500)
@given(data=st.data(), n=st.integers(0, 80))
def test_the_kernels_order_is_numpys_lexsort(data, n):
    """Best first by log score, ties by relevance, then by position, as the stable lexsort:
    many ties (a few distinct values), signed zeros and the -inf of a dropped candidate."""
    values = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, -math.inf, math.inf, 1e-300])
    score = np.array(data.draw(st.lists(values | st.floats(-5, 5), min_size=n, max_size=n)))
    tie = np.array(data.draw(st.lists(values, min_size=n, max_size=n)))
    made = RANK.best_first(score.astype(np.float64), tie.astype(np.float64))
    assert np.frombuffer(made, dtype=np.intp).tolist() == np.lexsort((-tie, -score)).tolist()


def test_the_kernels_order_defers_on_nan_and_other_input():
    kernel = RANK.best_first
    assert kernel(np.array([1.0, math.nan]), np.zeros(2)) is None
    assert kernel(np.zeros(2), np.array([math.nan, 1.0])) is None
    assert kernel(np.zeros(2), np.zeros(3)) is None
    assert kernel(np.zeros(2, dtype=np.intp), np.zeros(2)) is None
    assert np.frombuffer(kernel(np.zeros(3), np.zeros(3)), dtype=np.intp).tolist() == [0, 1, 2]


@given(data=st.data(), n=st.integers(1, 20), width=st.integers(1, 7))
def test_the_kernels_take_is_index_then_tolist(data, n, width):
    at = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=12)), dtype=np.intp)
    floats = np.array(data.draw(st.lists(_SCORES | st.just(math.nan), min_size=n, max_size=n)))
    ints = np.array(data.draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n)),
                    dtype=np.int64)
    matrix = np.array(data.draw(st.lists(_SCORES, min_size=n * width, max_size=n * width)),
                      dtype=np.float64).reshape(n, width)
    columns = (floats, ints, matrix, ints.astype(np.intp))
    made = RANK.take(at, columns)
    expected = [c[at].tolist() for c in columns]
    assert made[1] == expected[1] and made[3] == expected[3]  # the ints, as Python ints
    assert all(type(x) is int for x in made[1] + made[3])
    assert all(type(x) is float for x in made[0])
    # the floats to the bit (NaN, -0.0), the matrix row by row
    assert _bits(np.array(made[0])) == _bits(np.array(expected[0]))
    assert [len(row) for row in made[2]] == [len(row) for row in expected[2]]
    assert _bits(np.array(made[2]).ravel()) == _bits(np.array(expected[2]).ravel())


def test_the_kernels_take_defers_on_what_it_does_not_take():
    kernel, col = RANK.take, np.arange(4.0)
    assert kernel(np.array([3]), (col,)) == [[3.0]]
    assert kernel(np.array([4]), (col,)) is None  # out of range
    assert kernel(np.array([-1]), (col,)) is None  # numpy would wrap it: not the kernel's case
    assert kernel(np.array([0]), (col[::2],)) is None  # not contiguous
    assert kernel(np.array([0]), (np.zeros((2, 2, 2)),)) is None  # 3-d
    assert kernel(np.array([0.0]), (col,)) is None  # float positions
    assert kernel(np.array([0]), [col]) is None  # not a tuple


@given(data=st.data(), n=st.integers(1, 30),
       zero_weights=st.sets(st.integers(0, 5), max_size=3))
def test_a_zero_weight_column_of_ones_needs_no_clearing(data, n, zero_weights):
    """_off skips the mask only where clearing it would change no bit: the zero-weight
    columns hold the constant 1.0, whose log term is +0.0 (a -0.0 weight keeps the mask)."""
    from heaprank.config import SIGNALS, Weights
    from heaprank.scoring import rank as reranker

    weights = Weights(**{name: 0.0 if j in zero_weights else 1.0 + j
                         for j, name in enumerate(SIGNALS)})
    row = reranker.weight_row.__wrapped__(weights, None)  # (past the cache: see below)
    arrays = [np.array(data.draw(st.lists(st.floats(1e-300, 1e300), min_size=n, max_size=n)))
              for _ in SIGNALS]
    values = tuple(1.0 if j in zero_weights else arrays[j] for j in range(len(SIGNALS)))
    matrix = reranker.matrix(n, values)
    off = reranker.zero_mask(row, values)
    assert off is None  # no zero weight, or each one on a column of 1.0
    skipped = reranker.combine(matrix, row.array, np.ones(n), no_rule_fired=True, off=off)
    cleared = reranker.combine(matrix, row.array, np.ones(n), no_rule_fired=True, off=row.off)
    assert all(_bits(a.ravel()) == _bits(b.ravel()) for a, b in zip(skipped, cleared))
    if zero_weights:  # an array in a zero-weight column, or a -0.0 weight: the mask stays
        j = min(zero_weights)
        assert reranker.zero_mask(row, values[:j] + (arrays[j],) + values[j + 1:]) is row.off
        negative = Weights(**{name: -0.0 if j == k else 1.0 for k, name in enumerate(SIGNALS)})
        # (past the cache, which holds -0.0 and +0.0 weights as one: they compare equal)
        assert reranker.zero_mask(reranker.weight_row.__wrapped__(negative, None), values) is not None


def test_a_rerank_takes_the_new_kernels(monkeypatch):
    """relevance, recency, columns, best_first and take all run on a clean rerank."""
    from heaprank import Reranker
    from heaprank.scoring import rank, results
    from heaprank.scoring import signals as sig
    from tests.strategies import POOL

    taken: dict[str, list[bool]] = {}

    def watch(owner: Any, name: str) -> None:
        kernel = getattr(owner, name)

        def counted(*args: Any) -> Any:
            out = kernel(*args)
            taken.setdefault(name, []).append(out is not None)
            return out

        monkeypatch.setattr(owner, name, counted)

    for name in ("relevance_kernel", "halvings_kernel", "recency_kernel"):
        watch(sig, name)
    for name in ("columns_kernel", "best_first_kernel", "take_kernel"):
        watch(rank, name)
    watch(results, "instances_kernel")
    rr = Reranker()
    ranking = rr.rerank("when is my flight", POOL, namespace="ana", k=4, now=NOW)
    assert ranking[0].explain()
    assert set(taken) == {"relevance_kernel", "halvings_kernel", "recency_kernel",
                          "columns_kernel", "best_first_kernel", "take_kernel",
                          "instances_kernel"}
    assert all(all(calls) for calls in taken.values())


_FIELD = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4),
                   st.tuples(st.integers()), st.dictionaries(st.text(max_size=2), st.integers()))


@given(rows=st.lists(st.tuples(*[_FIELD] * 10), max_size=12))
def test_the_kernels_instances_are_the_python_results(rows):
    """Each result the kernel makes holds what new_ranked sets, slot by slot, the same objects
    (not copies), and reads, compares and pickles as a result made in Python."""
    import pickle

    from heaprank.scoring.results import _SLOTS, Ranked, new_ranked

    made = RANK.instances(Ranked, _SLOTS, tuple(rows))
    expected = tuple(map(new_ranked, rows))
    assert type(made) is tuple and len(made) == len(expected)
    for item, twin, row in zip(made, expected, rows):
        assert type(item) is Ranked
        assert all(slot.__get__(item) is value for slot, value in zip(_SLOTS, row))
        assert [slot.__get__(item) for slot in _SLOTS] == [slot.__get__(twin) for slot in _SLOTS]
    if made:
        assert pickle.loads(pickle.dumps(made[0])).rank == made[0].rank


def test_the_kernels_instances_defer_on_what_they_do_not_take():
    from dataclasses import dataclass

    from heaprank.scoring.results import _SLOTS, Ranked

    row = (1,) * len(_SLOTS)
    kernel = RANK.instances
    assert kernel(Ranked, _SLOTS, (row,)) is not None
    assert kernel(Ranked, _SLOTS, [row]) is None  # rows not a tuple
    assert kernel(Ranked, _SLOTS, (list(row),)) is None  # a row not a tuple
    assert kernel(Ranked, _SLOTS, (row[:-1],)) is None  # a row short of a slot
    assert kernel(Ranked, _SLOTS[:2] + _SLOTS[:1], ((1, 2, 3),)) is None  # a slot named twice
    assert kernel(Ranked, list(_SLOTS), (row,)) is None  # slots not a tuple
    assert kernel(int, (), ((),)) is None  # not a heap type

    @dataclass(slots=True)
    class Other:
        a: object

    assert kernel(Ranked, (Other.__dict__["a"],), ((1,),)) is None  # another class's slot

    class OwnNew(Ranked):
        __slots__ = ()

        def __new__(cls, *args: Any) -> OwnNew:
            return object.__new__(cls)

    assert kernel(OwnNew, _SLOTS, (row,)) is None
    assert kernel(Ranked, (Ranked.__dict__["explain"],), ((1,),)) is None  # not a member slot
