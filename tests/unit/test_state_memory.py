"""MemoryState specifics: expiry, the count bound, copies that cannot alter the state."""

from __future__ import annotations

import time

import numpy as np
import pytest

from heaprank import MemoryState
from heaprank.records import USED, Impression, Update, new_recall_id


def imp(recall_id: str) -> Impression:
    return Impression(recall_id=recall_id, namespace="n", qtype="other", time=0.0,
                      time_explicit=True, ids=("a",), slots=(("kind:none",),))


def _aged(seconds: float, salt: int) -> str:
    """A recall id made ``seconds`` ago."""
    return f"{(int((time.time() - seconds) * 1000) << 20) | salt:016x}"


def test_impressions_without_feedback_expire_after_their_time_to_live():
    state = MemoryState(impression_ttl_s=3600)
    old, fresh = _aged(7200, 1), _aged(10, 2)
    for rid in (old, fresh):
        state.put_impression(imp(rid))
    state.prune()
    assert state.get_impression(old) is None and state.get_impression(fresh) is not None


def test_impressions_with_feedback_are_bounded_by_count_not_by_age():
    state = MemoryState(max_impressions=3, impression_ttl_s=10 * 3600)
    ids = [_aged(7200 - i, i) for i in range(5)]
    for rid in ids:
        state.put_impression(imp(rid))
        assert state.apply([Update(rid, "n", 0.0, (1,), (USED,), ("a",), ("kind:none",),
                                   np.array([1.0]), np.array([0.0]))]) == [True]
    state.prune()
    assert [state.get_impression(r) is not None for r in ids] == [False, False, True, True, True]
    assert state.stats()["impressions"] == 3


def test_returned_impressions_are_values():
    state = MemoryState()
    rid = new_recall_id()
    state.put_impression(imp(rid))
    got = state.get_impression(rid)
    got.resolved["a"] = True  # a fresh dict: the state is not touched
    assert state.get_impression(rid).resolved == {}
    assert state.get_impression(rid) == got


def test_max_impressions_must_be_positive():
    with pytest.raises(ValueError, match="max_impressions"):
        MemoryState(max_impressions=0)
    with pytest.raises(ValueError, match="impression_ttl_s"):
        MemoryState(impression_ttl_s=0)


def test_recall_ids_draw_fresh_random_bits_in_a_forked_child():
    # The random bits come in batches from the OS: a child must not replay its parent's batch
    # (two workers of one server would hand out the same ids in the same millisecond).
    import json
    import os

    from heaprank.records import _random_bits20
    _random_bits20()  # a batch is held now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next draws, then out
        os.write(write, repr([_random_bits20() for _ in range(8)]).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = json.loads(os.read(read, 4096))
    assert child != [_random_bits20() for _ in range(8)]
    assert all(0 <= bits < 2**20 for bits in child)
