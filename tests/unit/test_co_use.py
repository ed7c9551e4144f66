"""Co-use associations: the settings, the Hebbian rule with LTP, the update of a namespace's
edges (prune, bounds), which pairs a feedback forms, and spreading activation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heaprank import ConfigError, CoUse
from heaprank.model.co_use import co_use_pairs, decayed, strengthened, update
from heaprank.scoring.spreading import spread

DAY = 86_400.0
NOW = 1_750_000_000.0
CU = CoUse()


# ------------------------------------------------------------------------------ settings

@pytest.mark.parametrize("field, value, message", [
    ("rate", 0.0, "co_use.rate: must be in (0, 1)"),
    ("rate", 0.01, "co_use.rate: must be above co_use.floor"),
    ("hop_decay", 1.0, "co_use.hop_decay: must be in (0, 1)"),
    ("max_per_doc", 0, "co_use.max_per_doc: must be >= 1"),
    ("max_rank", 1, "co_use.max_rank: must be >= 2"),
    ("depth", 1.5, "co_use.depth: expected an int"),
    ("cap", float("nan"), "co_use.cap: expected a finite number"),
    ("ltp_slowdown", 0.5, "co_use.ltp_slowdown: must be >= 1"),
    ("seeds", True, "co_use.seeds: expected a finite number"),
])
def test_bad_settings_name_the_field(field, value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CoUse(**{field: value})


def test_an_association_weight_needs_co_use_settings():
    from heaprank import Config, Learning

    with pytest.raises(ConfigError, match="weights.association"):
        Config().with_weights(association=1.0)
    assert Config(learning=Learning(co_use=CoUse())).with_weights(association=1.0).weights.association == 1.0
    with pytest.raises(ConfigError, match="co_use: expected CoUse"):
        Config(learning=Learning(co_use={"rate": 0.2}))  # type: ignore[arg-type]


# ------------------------------------------------------------------------ Hebbian rule, LTP

def test_co_use_strengthens_with_diminishing_returns():
    s, n, t = 0.0, 0.0, NOW
    steps = []
    for _ in range(6):
        s, n, t = strengthened(s, n, t, NOW, CU)
        steps.append(s)
    assert steps[0] == pytest.approx(0.2)
    assert steps == pytest.approx([1 - 0.8 ** k for k in range(1, 7)])  # s + 0.2 (1 - s)
    gains = np.diff([0.0, *steps])
    assert np.all(gains[1:] < gains[:-1]) and max(steps) < 1.0
    assert n == 6.0


def test_decay_halves_after_a_half_life_lengthened_by_the_strength():
    half_life = CU.half_life_s * (1 + 0.5)
    assert decayed(0.5, 1, NOW, NOW + half_life, CU) == pytest.approx(0.25)
    assert decayed(0.5, 1, NOW, NOW - DAY, CU) == 0.5  # an earlier time never decays it


def test_long_term_potentiation_slows_decay_tenfold():
    later = NOW + 60 * DAY
    plain = decayed(0.6, CU.ltp_threshold - 1, NOW, later, CU)
    potentiated = decayed(0.6, CU.ltp_threshold, NOW, later, CU)
    assert plain == pytest.approx(0.6 * 2 ** (-60 * DAY / (CU.half_life_s * 1.6)))
    assert potentiated == pytest.approx(0.6 * 2 ** (-60 * DAY / (CU.half_life_s * 10)))
    assert potentiated > plain


# -------------------------------------------------------------------------- pairs formed

def test_pairs_come_only_from_items_used_together():
    shown = ("a", "b", "c", "d")
    assert co_use_pairs(shown, [], [1], 20) == []
    assert co_use_pairs(shown, [], [1, 3], 20) == [("a", "c")]
    # a later call using d pairs it with what is already recorded used, and nothing else
    assert co_use_pairs(shown, [1, 3], [4], 20) == [("a", "d"), ("c", "d")]
    # beyond max_rank nothing pairs
    assert co_use_pairs(shown, [], [1, 3], 2) == []
    # the same id shown twice is not an edge to itself
    assert co_use_pairs(("a", "a"), [], [1, 2], 20) == []


# ------------------------------------------------------------------------ update, bounds

def _star(center: str, n: int) -> list[tuple[str, str]]:
    return [(min(center, f"n{i}"), max(center, f"n{i}")) for i in range(n)]


def test_a_document_keeps_its_strongest_edges_only():
    cu = CoUse(max_per_doc=3)
    adj: dict = {}
    count, _, _ = update(adj, 0, _star("hub", 2), NOW, cu, lambda: adj)
    count, _, _ = update(adj, count, _star("hub", 2), NOW, cu, lambda: adj)  # n0, n1 twice
    count, _, deleted = update(adj, count, [("hub", "n2"), ("hub", "n3")], NOW, cu, lambda: adj)
    assert sorted(adj["hub"]) == ["n0", "n1", "n3"]  # n2 lost the tie on id among the weakest
    assert ("hub", "n2") in deleted and "n2" not in adj  # no empty entry left behind
    assert count == 3


def test_edges_below_the_floor_are_pruned_when_their_document_is_touched():
    cu = CoUse()
    adj: dict = {}
    count, _, _ = update(adj, 0, [("a", "b")], NOW, cu, lambda: adj)
    far = NOW + 400 * DAY  # 0.2 decays below 0.02 in well under 400 days
    assert decayed(*adj["a"]["b"], far, cu) < cu.floor
    count, _, deleted = update(adj, count, [("a", "c")], far, cu, lambda: adj)
    assert deleted == {("a", "b")} and sorted(adj["a"]) == ["c"] and count == 1


def test_a_namespace_evicts_its_weakest_edges_down_to_ninety_percent():
    cu = CoUse(max_edges=10)
    adj: dict = {}
    count = 0
    for i in range(10):
        count, _, _ = update(adj, count, [(f"a{i}", f"b{i}")], NOW + i * DAY, cu, lambda: adj)
    assert count == 10
    count, _, deleted = update(adj, count, [("z0", "z1")], NOW + 10 * DAY, cu, lambda: adj)
    assert count == cu.evict_to == 9
    assert deleted == {("a0", "b0"), ("a1", "b1")}  # the oldest, hence weakest
    assert sum(len(v) for v in adj.values()) == 2 * count


# -------------------------------------------------------------------------------- spread

def _matrix(n: int, edges: dict[tuple[int, int], float]) -> tuple[np.ndarray, np.ndarray]:
    w, c = np.zeros((n, n)), np.zeros((n, n))
    for (i, j), s in edges.items():
        w[i, j] = w[j, i] = s
        c[i, j] = c[j, i] = 3
    return w, c


def test_no_edges_means_a_factor_of_one():
    base = np.log(np.array([0.9, 0.5, 0.2]))
    out = spread(base, *_matrix(3, {}), CU)
    assert out.factor.tolist() == [1.0, 1.0, 1.0] and out.partner.tolist() == [-1, -1, -1]


def test_a_candidate_co_used_with_the_best_gains_most():
    base = np.log(np.array([1.0, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1]))
    w, c = _matrix(7, {(0, 5): 0.8, (6, 4): 0.8})  # 5 with the best; 6 with a weak one
    out = spread(base, w, c, CoUse(seeds=5))
    assert out.factor[5] == pytest.approx(1 + 0.8 * 0.5)
    assert out.partner[5] == 0 and out.count[5] == 3 and out.hops[5] == 1
    # candidate 4 is a seed (5th best by input order among ties) at activation 0.1
    assert out.factor[6] == pytest.approx(1 + 0.1 * 0.8 * 0.5)
    assert out.factor[0] == 1.0  # the seed's own activation does not come back to it
    assert out.factor[1] == 1.0


def test_depth_decay_and_cap_bound_the_factor():
    base = np.log(np.array([1.0, 0.5, 0.4, 0.3]))
    w, c = _matrix(4, {(0, 1): 1.0, (1, 2): 1.0, (2, 3): 1.0})
    one = spread(base, w, c, CoUse(seeds=1, depth=1, hop_decay=0.5))
    assert one.factor.tolist() == pytest.approx([1.0, 1.5, 1.0, 1.0])
    two = spread(base, w, c, CoUse(seeds=1, depth=2, hop_decay=0.5))
    assert two.factor.tolist() == pytest.approx([1.0, 1.5, 1.25, 1.0])
    assert two.hops[2] == 2 and two.count[2] == 0
    full = np.ones((4, 4)) - np.eye(4)
    capped = spread(base, full, full, CoUse(seeds=4, depth=3, hop_decay=0.9, cap=0.3))
    assert capped.factor.max() == pytest.approx(1.3)


def test_dropped_candidates_do_not_seed():
    base = np.array([0.0, -np.inf, np.log(0.5)])
    w, c = _matrix(3, {(0, 1): 0.9, (1, 2): 0.9})
    out = spread(base, w, c, CoUse(seeds=1, depth=2))
    assert out.factor[2] == pytest.approx(1 + 0.9 * 0.5 * 0.9 * 0.5)  # passes through it
    assert math.isfinite(out.factor[1])
