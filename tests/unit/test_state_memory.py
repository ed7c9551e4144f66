"""MemoryState specifics: immediate pruning and copies that cannot alter the state."""

from __future__ import annotations

import pytest

from heaprank import MemoryState
from heaprank.state.base import Impression


def imp(recall_id: str) -> Impression:
    return Impression(recall_id=recall_id, namespace="n", query="q", qtype="other", time=0.0,
                      time_explicit=True, ids=("a",), features=(("kind:none",),))


def test_prunes_to_exactly_max_impressions():
    state = MemoryState(max_impressions=3)
    for i in range(5):
        state.put_impression(imp(f"r{i}"))
    assert [state.get_impression(f"r{i}") is not None for i in range(5)] == \
        [False, False, True, True, True]
    assert state.stats()["impressions"] == 3


def test_returned_impressions_are_copies():
    state = MemoryState()
    state.put_impression(imp("r"))
    got = state.get_impression("r")
    got.resolved["a"] = True
    assert state.get_impression("r").resolved == {}


def test_max_impressions_must_be_positive():
    with pytest.raises(ValueError, match="max_impressions"):
        MemoryState(max_impressions=0)
