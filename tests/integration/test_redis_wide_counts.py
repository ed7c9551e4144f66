"""A namespace's counts on Redis stay exact enough that one more feedback always moves them
(float32 counts stopped growing by fractional credit past ~2 million), and a
links string of the float32 format is still read, rewritten by a write or by
``heaprank state migrate``."""

from __future__ import annotations

import numpy as np
import pytest

from heaprank.app.cli import main as cli
from heaprank.records import IGNORED, Impression, Update
from heaprank.state.redis import RedisState, blob
from tests.integration.redis_servers import unique_prefix

FEATURE = "kind:fact"


@pytest.fixture(params=["redis", "redis-cluster"])
def url(request) -> str:
    return request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url")


def _feed(state: RedisState, namespace: str, step: int, dpos: float, dneg: float) -> None:
    """One impression of one shown item, and a feedback adding ``(dpos, dneg)`` to FEATURE."""
    rid = state.new_recall_id(namespace)
    imp = Impression(recall_id=rid, namespace=namespace, qtype="when",
                     time=1_750_000_000.0 + step, time_explicit=True, ids=(f"d{step}",),
                     slots=(("kind:fact",),))
    assert state.put_impression(imp) == rid
    update = Update(rid, namespace, imp.time, (1,), (IGNORED,), (), (FEATURE,),
                    np.array([dpos]), np.array([dneg]))
    assert state.apply([update]) == [True]


def _own(state: RedisState, namespace: str) -> tuple[float, float]:
    names, pos, neg = state.list_links(namespace)
    at = list(names).index(FEATURE)
    return float(pos[at]), float(neg[at])


def _pooled(state: RedisState) -> tuple[float, float]:
    names, pos, neg = state.list_links(None)
    at = list(names).index(FEATURE)
    return float(pos[at]), float(neg[at])


def test_a_count_of_ten_million_still_moves_by_a_fractional_feedback(url):
    state = RedisState(url, prefix=unique_prefix())
    try:
        _feed(state, "busy", 0, 1e7, 1e7)
        _feed(state, "busy", 1, 0.1, 0.1)  # a reject's discounted credit
        pos, neg = _own(state, "busy")
        print(f"count 1e7 + 0.1 stored as {pos!r}")
        assert pos == 1e7 + 0.1 and neg == 1e7 + 0.1  # (float32 kept 1e7: the 0.1 was lost)
        _feed(state, "busy", 2, 0.0, 0.1)
        assert _own(state, "busy") == (1e7 + 0.1, 1e7 + 0.1 + 0.1)
        assert _pooled(state) == _own(state, "busy")
        # Small counts keep the compact float32 form: 1 marker byte, 1 varint, 2 x 4 bytes.
        _feed(state, "small", 3, 0.25, 1.5)
        assert len(state.client.get(state.layout.ns_key("l", "small"))) == 10
    finally:
        state.clear()
        state.close()


def _to_old_format(state: RedisState, namespace: str) -> bytes:
    """Rewrite a namespace's links string in format 1 (float32, no marker), as before."""
    key = state.layout.ns_key("l", namespace)
    entries = blob.decode(state.client.get(key))
    old = blob.encode([(i, p, n) for i, (p, n) in entries.items()], version=1)
    assert not blob.is_wide(old)
    state.client.set(key, old)
    return old


def test_links_of_the_float32_format_are_read_and_migrated_forward(redis_url, capsys):
    prefix = unique_prefix()
    state = RedisState(redis_url, prefix=prefix)
    try:
        for ns in ("migrated", "written"):
            _feed(state, ns, 0, 2.5, 7.25)
            _to_old_format(state, ns)
        assert _own(state, "migrated") == (2.5, 7.25)  # read as before (Python's decoder)
        # A feedback on a string of the old format (the Lua decoder) writes the new one.
        _feed(state, "written", 1, 0.5, 0.25)
        assert _own(state, "written") == (3.0, 7.5)
        assert blob.is_wide(state.client.get(state.layout.ns_key("l", "written")))
        # heaprank state migrate rewrites the others.
        assert cli(["state", "migrate", f"{redis_url}?prefix={prefix}"]) == 0
        assert "links_rewritten" in capsys.readouterr().out
        key = state.layout.ns_key("l", "migrated")
        assert blob.is_wide(state.client.get(key))
        assert _own(state, "migrated") == (2.5, 7.25)
        _feed(state, "migrated", 2, 1e7, 0.0)
        _feed(state, "migrated", 3, 0.1, 0.0)
        assert _own(state, "migrated") == (2.5 + 1e7 + 0.1, 7.25)
        assert _pooled(state) == (2.5 + 3.0 + 1e7 + 0.1, 7.25 + 7.5)
        # Run again: nothing left to rewrite.
        from heaprank.state.redis.migrate import migrate_url
        assert migrate_url(f"{redis_url}?prefix={prefix}")["links_rewritten"] == 0
    finally:
        state.clear()
        state.close()


def test_both_formats_round_trip_in_python():
    entries = [(1, 0.25, 3.0), (2, 0.0, 3.0), (40, 1e7 + 0.1, 0.1), (41, 5.0, 0.1)]
    assert blob.decode(blob.encode(entries)) == {i: (p, n) for i, p, n in entries}
    old = blob.decode(blob.encode(entries, version=1))
    assert old[40] == (1e7, pytest.approx(0.1)) and old[1] == (0.25, 3.0)
    with pytest.raises(ValueError, match="version"):
        blob.encode(entries, version=3)
