"""The memory backend's lean feedback arithmetic (``LeanLearner.learn``: scratch arrays, one
fancy add per row) gives the counts of the general arithmetic (``links.credit_rows`` then
``MemoryState._add``) to the last bit; ``check_ids``' shortcut for plain ids gives what checking
each id gives; and two rerankers crossing their feedbacks on one state learn on the lean path
what they learn on the general path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from heaprank import MemoryState, Prior, Reranker
from heaprank._checks import check_id, check_ids
from heaprank.learning import links as linkmath
from heaprank.state.memory_learning import Row
from tests.strategies import NOW, POOL

FEATURES = [f"f{i}" for i in range(12)]

#: A feature row: distinct features, drawn from a small vocabulary so that rows overlap.
rows = st.lists(st.sampled_from(FEATURES), min_size=1, max_size=7, unique=True)

#: Weights and link means with many low bits set, so a change in the order of additions shows.
weights = st.one_of(st.floats(min_value=1e-3, max_value=2.0),
                    st.sampled_from([1.0, 1 / 3, 0.6309297535714575, 0.43067655807339306]))
means = st.one_of(st.floats(min_value=1e-9, max_value=1.0),
                  st.sampled_from([1.0, 0.999999999, 1e-12]))

#: Evidence already in the state before the feedback: (feature, pos, neg) for the namespace.
evidence = st.lists(st.tuples(st.sampled_from(FEATURES), st.floats(0.0, 50.0),
                              st.floats(0.0, 50.0)), max_size=10, unique_by=lambda e: e[0])


def _state(before: list[tuple[str, float, float]]) -> MemoryState:
    state = MemoryState()
    links = state._links
    links.intern(FEATURES)  # the same ids in both states
    if before:
        ns = links.namespace("ns")
        idx = links.intern([f for f, _, _ in before])
        links.add(ns, idx, np.array([p for _, p, _ in before]),
                  np.array([n for _, _, n in before]))
    links.add(links.namespace("other"), links.intern(FEATURES[:3]), np.ones(3), np.ones(3))
    return state


def _snapshot(state: MemoryState) -> tuple:
    return tuple(tuple(a.tolist() if hasattr(a, "tolist") else a for a in state.list_links(ns))
                 for ns in (None, "ns", "other")), state.version


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(rows, weights), max_size=9), st.lists(rows, max_size=3),
       st.data(), evidence, st.booleans(), st.booleans())
def test_lean_arithmetic_is_credit_rows_to_the_last_bit(ignored, used, data, before, em, kept):
    lean, general = _state(before), _state(before)
    prior = Prior()
    # One row object per distinct row, as the slot cache gives: the same row again sums its
    # weights first, in item order, as apply_used and the batch do.
    row_of: dict[tuple[str, ...], Row] = {}

    def row(features: Sequence[str]) -> Row:
        key = tuple(features)
        if key not in row_of:
            row_of[key] = Row(tuple(lean._links.intern(features).tolist()))
        return row_of[key]

    rejected: dict[Row, float] = {}
    for features, weight in ignored:
        rejected[row(features)] = rejected.get(row(features), 0.0) + weight
    used_rows: list[tuple[Row, np.ndarray | None]] = []
    for features in used:
        read = np.array(data.draw(st.lists(means, min_size=len(features),
                                           max_size=len(features)))) if kept else None
        used_rows.append((row(features), read))

    def p_of(read: np.ndarray | None, ids: Sequence[int]) -> np.ndarray:
        return read if read is not None else general._links.posterior_mean(
            general._links.namespace("ns"), ids, prior)

    idx, dpos, dneg = linkmath.credit_rows([(r.ids, w) for r, w in rejected.items()],
                                           [(r.ids, read) for r, read in used_rows], p_of, em=em)
    general._links.add(general._links.namespace("ns"), idx, dpos, dneg)
    lean._learner.learn(lean._links.namespace("ns"), rejected, used_rows, em, prior)
    assert _snapshot(lean) == _snapshot(general)
    assert not lean._links.dpos.any() and not lean._links.dneg.any()  # the scratch is zeroed


ids = st.one_of(st.sampled_from(["a", "doc-1", "Zoë", "", " ", "\t", "\u3000", "x\ud800",
                                 "\udfff", "a b"]),
                st.text(max_size=4), st.integers(), st.none())


def _outcome(call):  # type: ignore[no-untyped-def]
    try:
        return call()
    except Exception as exc:  # the error's type and message are the outcome
        return type(exc), str(exc)


@given(st.lists(ids, max_size=4), st.booleans())
def test_check_ids_is_check_id_on_each(value, as_tuple):
    value = tuple(value) if as_tuple else value
    reference = _outcome(lambda: tuple(check_id(item, f"used[{j}]")
                                       for j, item in enumerate(value)))
    assert _outcome(lambda: check_ids(value, "used")) == reference


class _General(MemoryState):
    apply_used = None  # type: ignore[assignment]


class _Lean(MemoryState):
    lean = 0

    def apply_used(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = super().apply_used(*args, **kwargs)
        self.lean += out is not None
        return out


def _cross(state: MemoryState, schedule: list[tuple[int, int, list[int]]]) -> list[object]:
    """Two rerankers on one state: each reranks, then their feedbacks come in the order given
    (each one's kept link means stale once the other's feedback changed the counts)."""
    first, second = Reranker(state), Reranker(state)
    seen: list[object] = []
    for t, (k, order, used) in enumerate(schedule):
        rankings = [rr.rerank("when is my flight", POOL, namespace="alice", k=k, now=NOW + t)
                    for rr in (first, second)]
        pairs = list(zip((first, second), rankings))
        for rr, ranking in (pairs if order == 0 else pairs[::-1]):
            out = rr.feedback(ranking.recall_id, [ranking.ids[r] for r in used if r < k],
                              now=NOW + t + 1)
            seen.append((out.applied, out.already_recorded))
    return seen


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 1),
                          st.lists(st.integers(0, 7), max_size=3)), min_size=1, max_size=6))
def test_two_rerankers_crossing_feedbacks_learn_the_same(schedule):
    lean, general = _Lean(), _General()
    assert _cross(lean, schedule) == _cross(general, schedule)
    for ns in (None, "alice"):
        assert [a.tolist() if hasattr(a, "tolist") else a for a in lean.list_links(ns)] == \
            [a.tolist() if hasattr(a, "tolist") else a for a in general.list_links(ns)]
    assert lean.iter_docs("alice") == general.iter_docs("alice")
    assert lean.stats() == general.stats()
    assert lean.lean > 0  # the lean path did run


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                 st.sampled_from([NOW, -2_208_988_800.0, 7_258_118_400.0, 7_258_118_400.5,
                                  NOW * 1e3, 0.0, -0.0])),
       st.integers(0, 2))
def test_lean_feedback_reads_now_as_the_general_path(now, used):
    learned = []
    for state in (_Lean(), _General()):
        rr = Reranker(state)
        ranking = rr.rerank("when is my flight", POOL, namespace="alice", k=3, now=NOW)
        try:
            out = rr.feedback(ranking.recall_id, [ranking.ids[used]], now=now)
            seen: object = (out.applied, out.already_recorded)
        except Exception as exc:  # the error's type and message are the outcome
            seen = type(exc), str(exc)
        learned.append((seen, state.iter_docs("alice"),
                        [a.tolist() if hasattr(a, "tolist") else a for a in state.list_links(None)]))
    assert learned[0] == learned[1]
