"""The candidates stage's kernel (``heaprank._accel._candidates.coerce_columns``, through
:func:`coerce_c`) against the checked path, the specification of a valid candidate.

The kernel either builds exactly the batch :func:`coerce_checked` builds (every field, element
types included) or defers (returns None) so the Python paths decide. It takes
:class:`Candidate` objects only; plain dicts, tags, int keys and flags go to the fast Python
path (tests/property/test_coerce_paths.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank.scoring.candidates import _C_SLOTS, Candidate, coerce_c, coerce_checked
from heaprank.scoring.results import Ranked
from tests.property.kernels import stage_kernels
from tests.property.test_coerce_paths import assert_same_batch, uniform_candidate_lists
from tests.strategies import (
    KINDS,
    NOW,
    SOURCES,
    TEXTS,
    WILD_TARGETS,
    candidate_lists,
    clean_candidate,
    near_clean_candidate_lists,
    wild_candidate_lists,
)

stage_kernels("candidates")


def check_kernel_batch(items: list[Any]) -> Any:
    """The kernel's batch is the checked path's (every field, element types included), or
    None where the checked path raises or flags anything."""
    built = coerce_c(items, now=NOW)
    if built is None:
        return None
    checked = coerce_checked(items, now=NOW, on_invalid="neutral")
    assert all(flags == () for flags in checked.flags)
    assert_same_batch(built, checked)
    return built


@given(items=wild_candidate_lists)
def test_the_kernel_batch_is_the_checked_batch_on_wild_input(items):
    check_kernel_batch(items)


@pytest.mark.parametrize("target", WILD_TARGETS)
@given(data=st.data())
def test_the_kernel_batch_is_the_checked_batch_next_to_a_wild_value(target, data):
    check_kernel_batch(data.draw(near_clean_candidate_lists(target)))


@pytest.mark.parametrize("target", [t for t in WILD_TARGETS if t != "metadata"])
@given(data=st.data())
def test_the_kernel_batch_is_the_checked_batch_on_uniform_metadata(target, data):
    check_kernel_batch(data.draw(uniform_candidate_lists(target)))


@given(items=candidate_lists(scored=None))
def test_the_kernel_takes_clean_candidates(items):
    items = [clean_candidate(item, True) for item in items]
    assert check_kernel_batch(items) is not None


@given(items=candidate_lists(scored=None), as_objects=st.booleans())
def test_the_kernel_leaves_plain_dicts_to_the_fast_python_path(items, as_objects):
    items = [clean_candidate(item, as_objects) for item in items]
    assert (check_kernel_batch(items) is None) == (not as_objects)


@given(items=candidate_lists(scored=None),
       extra=st.sampled_from([{"tags": "travel"}, {"tags": ["a"]}, {"key": 7}, {"thread": 7},
                              {"superseded": False}]))
def test_the_kernel_leaves_tags_int_keys_and_flags_to_the_fast_python_path(items, extra):
    for item in items:
        item["metadata"].update(extra)
    items = [clean_candidate(item, True) for item in items]
    assert coerce_c(items, now=NOW) is None


@given(items=candidate_lists(scored=None), key=st.sampled_from(["plan", "", None]))
def test_the_kernel_takes_str_keys_and_threads(items, key):
    for item in items:
        item["metadata"].update(key=key, thread=key)
    items = [clean_candidate(item, True) for item in items]
    assert check_kernel_batch(items) is not None


@pytest.mark.parametrize("items", [
    [],
    [{"id": "a", "text": "t", "metadata": {"kind": "fact"}}],  # a plain dict: Python
    [{"id": "a", "text": "t", "kind": "fact"}],  # a top-level shape field: the Python paths
    [{"id": "a", "text": "t", "metadata": {"tags": {"a"}}}],  # a set of tags
    [{"id": "a", "text": "t", "metadata": {"created_at": "2025-06-15T15:06:40Z"}}],
    [{"id": "a", "text": "t", "score": np.float64(1.0)}],
    [{"id": "a", "text": "t", "metadata": {"kind": "fact"}}, {"id": "b", "text": "t", "metadata": ()}],
    ({"id": "a", "text": "t"}, {"id": "a", "text": "u"}),  # a duplicate id
    [{"id": "a", "text": "t", "score": 1.0}, {"id": "b", "text": "u"}],  # some scores missing
])
def test_the_kernel_defers_to_the_python_paths_on_the_unusual(items):
    assert coerce_c(items, now=NOW) is None


def test_a_str_subclass_key_goes_to_the_python_paths():
    class Key(str):
        pass

    items = [Candidate("a", "t", None, {Key("kind"): "fact"})]
    assert coerce_c(items, now=NOW) is None
    assert coerce_checked(items, now=NOW).kinds == ("fact",)


def test_the_kernel_agrees_with_the_checked_path_on_the_latency_benchmarks_candidates():
    items = [clean_candidate({"id": f"m{i}", "text": TEXTS[i % len(TEXTS)], "score": i / 7,
                              "metadata": {"created_at": NOW - 3600 * i, "kind": KINDS[i % 5],
                                           "source": SOURCES[i % 4]}}, True)
             for i in range(50)]
    assert_same_batch(coerce_c(items, now=NOW), coerce_checked(items, now=NOW))


@pytest.mark.parametrize("key", [7, None, ("kind",), b"kind"])
def test_a_metadata_key_that_is_not_a_str_goes_to_the_python_paths(key):
    items = [Candidate("a", "t", None, {key: 1, "kind": "fact"})]
    assert coerce_c(items, now=NOW) is None
    assert coerce_checked(items, now=NOW).kinds == ("fact",)


def test_the_kernel_returns_the_candidates_as_a_tuple_it_holds():
    items = [Candidate("a", "t"), Candidate("b", "u")]
    batch = coerce_c(items, now=NOW)
    assert type(batch.items) is tuple and batch.items == tuple(items)
    items.clear()  # the caller's list changes after the call: the batch keeps its own
    assert [item.id for item in batch.items] == ["a", "b"]


def test_the_kernel_checks_its_arguments():
    kernel = stage_kernels("candidates").coerce_columns
    with pytest.raises(TypeError, match="expected 7 arguments"):
        kernel([])
    with pytest.raises(TypeError, match="bad arguments"):
        kernel([], None, None, b"", (), 0.0, 0.0)


def test_the_kernel_defers_on_slots_that_are_not_one_classs_object_slots():
    kernel = stage_kernels("candidates").coerce_columns
    items = [Candidate("a", "t")]
    args = ({}, b"", (), NOW, NOW)
    assert kernel(items, _C_SLOTS, *args) is not None
    assert kernel(items, _C_SLOTS[:3], *args) is None
    assert kernel(items, (*_C_SLOTS[:3], Ranked.__dict__["rank"]), *args) is None
    assert kernel(items, (None, *_C_SLOTS[1:]), *args) is None
    assert kernel(items, list(_C_SLOTS), *args) is None
