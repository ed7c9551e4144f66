"""The feedback stage's kernels (``heaprank._accel._feedback``) against the memory backend's
Python passes: ``shown_rows`` finds the rows the loop of ``apply_used`` finds, and
``learn_known`` adds the counts ``links.credit_rows`` gives, to the bit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heaprank.records import UsedFeedback
from heaprank.state.memory_learning import Fresh
from tests.property.kernels import stage_kernels
from tests.strategies import NOW

FEEDBACK = stage_kernels("feedback")


#: Feature rows by their slots, as a reranker hands them (one tuple object per row)
_ROW_SLOTS = [("kind:fact", "src:chat"), ("kind:note",), ("kind:fact", "src:mail"), ("kind:x",)]


def _loop_rows(state, ids, slots, used, qtype, weights):
    """What the Python loop of apply_used hands to _learn: (rejected rows and their summed
    weights, used rows), and the verdicts."""
    from heaprank.learning.links import Prior

    handed = []
    learner = state._learner
    learner.learn = lambda ns, rejected, used_rows, em, learning: handed.append(
        (rejected, used_rows))
    prior = Prior()
    request = UsedFeedback("r", "ns", tuple(used), None, prior.a0, prior.b0, prior.kappa, False,
                           weights, lambda rank: 1.0)
    verdicts = learner.credit_shown(Fresh(state._links.namespace("ns"), ids, slots, qtype, False,
                                          set(used), None, request))
    del learner.learn
    return handed[0], verdicts


@given(plan=st.lists(st.tuples(st.integers(0, len(_ROW_SLOTS) - 1), st.booleans()), min_size=1,
                     max_size=12),
       weights=st.lists(st.floats(1e-3, 4.0), min_size=13, max_size=13))
def test_the_kernels_shown_rows_are_the_rows_the_python_loop_makes(plan, weights):
    """Repeated rows, any used subset, any weights: the same rows in the same order, the same
    summed weights to the bit, the same verdicts; a row is the one object both find."""
    from heaprank import MemoryState

    state = MemoryState()
    ids = tuple(f"d{i}" for i in range(len(plan)))
    slots = tuple(_ROW_SLOTS[j] for j, _ in plan)
    used = {d for d, (_, is_used) in zip(ids, plan) if is_used}
    table = [math.inf, *weights]
    (rejected, used_rows), verdicts = _loop_rows(state, ids, slots, used, "who", table)
    got = FEEDBACK.shown_rows(ids, slots, used, state._learner.rows_by_slots, "who", table)
    assert got is not None
    raws, sums, rows, positions, kernel_verdicts = got
    assert raws == [row.raw for row in rejected] + [row.raw for row, _ in used_rows]
    assert [s.hex() for s in sums] == [w.hex() for w in rejected.values()]
    assert all(a is b for a, (b, _) in zip(rows, used_rows, strict=True))
    assert positions == [i for i, d in enumerate(ids) if d in used]
    assert list(kernel_verdicts) == verdicts


class Id(str):
    """An id whose comparisons would run Python code inside the kernel: it defers instead."""

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_kernels_shown_rows_defer_to_the_loop_where_it_must_run():
    from heaprank import MemoryState

    state = MemoryState()
    ids, slots, table = ("a", "b"), (_ROW_SLOTS[0], _ROW_SLOTS[1]), [math.inf, 1.0, 0.5]
    kernel = FEEDBACK.shown_rows
    assert kernel(ids, slots, {"a"}, state._learner.rows_by_slots, "who", table) is None  # rows unknown
    _loop_rows(state, ids, slots, {"a"}, "who", table)
    by_slots = state._learner.rows_by_slots
    assert kernel(ids, slots, {"a"}, by_slots, "who", table) is not None
    assert kernel(ids, slots, {"a"}, by_slots, "when", table) is None  # another question type
    assert kernel(ids, slots, {"a"}, by_slots, "who", table[:2]) is None  # too few weights
    assert kernel(ids, slots, set(), by_slots, "who", [math.inf, 1.0, 1]) is None  # an int
    assert kernel(list(ids), slots, {"a"}, by_slots, "who", table) is None  # not a tuple
    assert kernel(ids, slots, {"a", Id("b")}, by_slots, "who", table) is None  # a str subclass
    assert kernel((Id("a"), "b"), slots, {"a"}, by_slots, "who", table) is None
    copy = (tuple(list(_ROW_SLOTS[0])), _ROW_SLOTS[1])  # equal slots, another object
    assert kernel(ids, copy, {"a"}, by_slots, "who", table) is None


def test_a_fresh_feedback_takes_the_kernels(monkeypatch):
    """The lean feedback runs its rows through shown_rows once its rows are known."""
    from heaprank import Reranker
    from heaprank.state import memory_learning as memory
    from tests.strategies import POOL

    calls = []
    kernel = memory.rows_kernel

    def counted(*args):
        out = kernel(*args)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(memory, "rows_kernel", counted)
    rr = Reranker()
    for t in range(3):
        ranking = rr.rerank("when is my flight", POOL, namespace="ana", k=4, now=NOW + t)
        rr.feedback(ranking.recall_id, used=[ranking.ids[0]], now=NOW + t)
    assert calls[0] is False and calls[-1] is True


# ------------------------------------------------------------------- learn_known's credit

#: Means that make the exact sum work: near 1 (terms of -37), tiny, equal ones (ties), zeros.
_MEANS = st.one_of(st.floats(0.0, 1.0), st.sampled_from([
    0.0, 1.0, 1e-300, 5e-324, 0.5, 1 - 2**-53, 1 - 2**-52, 0.999999999, 1e-12, 0.1, 0.2, 0.3]))


def _credit(means: list[list[float]], weights: list[float]) -> tuple[Any, Any]:
    """The kernel's counts and credit_rows' for rows of distinct ids: the ignored rows (one
    per weight, ids 0..3), then one used row per list of means (its own ids)."""
    from heaprank.learning import links as linkmath

    rejected = [(tuple(range(4)), w) for w in weights]
    used, start = [], 4
    for ps in means:
        used.append((tuple(range(start, start + len(ps))), np.array(ps)))
        start += len(ps)
    pos, neg, gpos, gneg = (np.zeros(start) for _ in range(4))
    ids = np.arange(start, dtype=np.int64)
    applied = FEEDBACK.learn_known(
        tuple(np.array(r, dtype=np.int64).tobytes() for r, _ in rejected + used),
        [w for _, w in rejected], [ps for _, ps in used], ids, pos, neg, gpos, gneg)
    idx, dpos, dneg = linkmath.credit_rows(rejected, used, lambda read, _: read, em=True)
    want_pos, want_neg = np.zeros(start), np.zeros(start)
    want_pos[idx] += dpos
    want_neg[idx] += dneg
    return (applied, pos, neg, gpos, gneg), (want_pos, want_neg)


@settings(max_examples=1000)
@given(means=st.lists(st.lists(_MEANS, min_size=1, max_size=60), min_size=1, max_size=3),
       weights=st.lists(st.floats(1e-3, 4.0), max_size=3))
def test_the_kernels_credit_is_credit_rows_to_the_bit(means, weights):
    """U = 1 - prod(1 - p) from the log terms summed exactly: math.fsum in Python, Shewchuk's
    partials in C; fsum is correctly rounded, so the shares and so the counts are the same
    bits."""
    (applied, pos, neg, gpos, gneg), (want_pos, want_neg) = _credit(means, weights)
    assert applied is True
    for got, want in ((pos, want_pos), (neg, want_neg), (gpos, want_pos), (gneg, want_neg)):
        assert got.tobytes() == want.tobytes()


def test_the_kernels_credit_defers_on_means_it_does_not_take():
    for means in ([[0.5, 1.5]], [[math.nan]], [[0.5] * 300]):  # past [0, 1], past its room
        (applied, pos, *_), _ = _credit(means, [1.0])
        assert applied is False and not pos.any()


def test_learn_known_checks_its_arguments():
    kernel, ids, zeros = FEEDBACK.learn_known, np.arange(2), np.zeros(2)
    with pytest.raises(TypeError, match="do not match"):
        kernel((b"",), [], [], ids, zeros, zeros, zeros, zeros)
    with pytest.raises(TypeError, match="not bytes of int64"):
        kernel((b"abc",), [1.0], [], ids, zeros, zeros, zeros, zeros)
    with pytest.raises(ValueError, match="different lengths"):
        kernel((), [], [], ids, np.zeros(3), zeros, zeros, zeros)
    assert kernel((ids.tobytes(),), [1], [], ids, zeros, zeros, zeros, zeros) is False  # an int
