"""The fast coercion path is a cache of the checked one: same batch, or it defers.

:func:`coerce_checked` is the specification of a valid candidate; :func:`coerce_fast` must
either return exactly the batch the checked path builds (every field, NaN positions included)
or return None so the checked path decides (and raises its error). On any input.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank.candidates import CandidateBatch, coerce_candidates, coerce_checked, coerce_fast
from heaprank.errors import HeapRankError
from tests.strategies import (
    NOW,
    WILD_TARGETS,
    candidate_lists,
    clean_candidate,
    near_clean_candidate_lists,
    wild_candidate_lists,
)

BATCH_FIELDS = CandidateBatch.__dataclass_fields__


def assert_same_batch(got: CandidateBatch, want: CandidateBatch) -> None:
    for name in BATCH_FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        if isinstance(b, np.ndarray):
            assert isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, name
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
        elif name == "items":
            assert len(a) == len(b) and all(x is y for x, y in zip(a, b)), name
        else:
            assert a == b, name
            assert [type(v) for v in a] == [type(v) for v in b], name


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return "batch", call()
    except Exception as exc:  # every error: the test then checks it is one heaprank means
        return "error", exc


def check_paths_agree(items: list[Any], on_invalid: str) -> None:
    """The fast batch is the checked batch (or None), and the public entry point gives the
    checked path's batch or its very error."""
    fast = coerce_fast(items, now=NOW)
    kind, checked = outcome(lambda: coerce_checked(items, now=NOW, on_invalid=on_invalid))
    if kind == "error":
        assert isinstance(checked, HeapRankError), repr(checked)
        assert isinstance(checked, (TypeError, ValueError)), repr(checked)
        assert fast is None
    elif fast is not None:
        assert_same_batch(fast, checked)
        assert all(flags == () for flags in checked.flags)
    kind2, public = outcome(lambda: coerce_candidates(items, now=NOW, on_invalid=on_invalid))
    assert kind2 == kind
    if kind == "error":
        assert type(public) is type(checked) and str(public) == str(checked)
    else:
        assert_same_batch(public, checked)


@given(items=wild_candidate_lists, on_invalid=st.sampled_from(["raise", "neutral"]))
def test_paths_agree_on_wild_input(items, on_invalid):
    check_paths_agree(items, on_invalid)


@pytest.mark.parametrize("target", WILD_TARGETS)
@given(data=st.data(), on_invalid=st.sampled_from(["raise", "neutral"]))
def test_paths_agree_on_one_wild_value_among_clean_ones(target, data, on_invalid):
    check_paths_agree(data.draw(near_clean_candidate_lists(target)), on_invalid)


@given(items=candidate_lists(scored=None), as_objects=st.booleans())
def test_fast_path_takes_clean_input(items, as_objects):
    items = [clean_candidate(item, as_objects) for item in items]
    fast = coerce_fast(items, now=NOW)
    assert fast is not None
    assert_same_batch(fast, coerce_checked(items, now=NOW))
