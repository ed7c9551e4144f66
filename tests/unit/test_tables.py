"""The open-addressing tables the C kernels read: every key found, probes short for the keys
they really get (row keys are ``slot * 2**17 + rest``: one question type's rows differ only in
their high bits, which once put them all on one chain and made reranks quadratic)."""

from __future__ import annotations

import random

import numpy as np

from heaprank import Reranker
from heaprank._accel.tables import OpenTable, RowTable, ShapeTable, home, homes

ROW_SCALE = 2 ** 17


def longest_probe(table: OpenTable) -> int:
    """The most entries any held key's lookup walks past (its distance from its home)."""
    entries, mask = table.entries, table.mask
    held = np.nonzero(entries[:, 1])[0]
    return max(((int(at) - home(int(entries[at, 0]))) & mask for at in held), default=0)


def test_one_question_types_100k_row_keys_spread_evenly() -> None:
    table = RowTable()
    for slot in range(100_000):
        table.insert(slot * ROW_SCALE + 37, slot)
    assert len(table) == 100_000
    assert longest_probe(table) <= 40  # was 100,000: one chain


def test_every_key_is_found_after_inserts_and_discards() -> None:
    rng = random.Random(7)
    table = RowTable()
    keys = [rng.randrange(1 << 40) * ROW_SCALE + rng.randrange(64) for _ in range(5_000)]
    for row, key in enumerate(keys):
        table.insert(key, row)
    gone = set(rng.sample(keys, 2_000))
    for key in gone:
        table.discard(key)
    for row, key in enumerate(keys):
        held = table.entries[table._find(key)]
        assert (held[1] != 0) == (key not in gone)
        if key not in gone:
            assert held[1] == row + 1
    assert len(table) == len(set(keys) - gone)


def test_reranks_with_varied_labels_keep_the_row_cache_chains_short() -> None:
    rr = Reranker()
    for i in range(1_500):
        cands = [{"id": f"d{j}", "text": "Booked the flight to Lisbon",
                  "metadata": {"source": f"src-{i}-{j}", "kind": f"kind-{i % 97}-{j}"}}
                 for j in range(3)]
        rr.rerank("When is my flight?", cands)
    table = rr._space._row_table
    if table is None:  # the pure-Python passes keep their rows in a dict
        assert len(rr._space._rows) >= 4_000
        return
    assert len(table) >= 4_000
    assert longest_probe(table) <= 40


def test_homes_of_an_array_are_each_keys_home() -> None:
    rng = random.Random(3)
    keys = [rng.randrange(-(1 << 63), 1 << 63) for _ in range(2_000)] + [0, -1, 1 << 62]
    assert homes(np.array(keys, dtype=np.int64)).tolist() == [home(key) for key in keys]


def test_a_grown_table_holds_every_entry_where_its_probe_finds_it() -> None:
    """Growth places the entries again by whole-array passes: each key, its row and the other
    columns are found from the key's home with no empty entry before them."""
    table = ShapeTable()
    keys = [slot * ROW_SCALE + 5 for slot in range(20_000)]  # grows 1,024 -> 65,536
    for i, key in enumerate(keys):
        table.insert(key, i * ROW_SCALE, frozenset({f"w{i}"}))
    assert len(table) == 20_000 and len(table.entries) == 65_536
    for i, key in enumerate(keys):
        at = table._find(key)
        assert table.entries[at].tolist()[:2] == [key, i * ROW_SCALE + 1]
        assert table.words[int(table.entries[at, 3])] == frozenset({f"w{i}"})
    assert longest_probe(table) <= 40
    table.discard(keys[0])
    assert all(table.entries[table._find(key), 0] == key for key in keys[1:50])


def test_a_growth_whose_run_wraps_around_the_end_places_every_entry() -> None:
    """Keys homed at the table's last places: their run passes its end and wraps to the
    start, where the keys homed there must still be found."""
    table = RowTable()
    size = 2 * len(table.entries)  # after the growth below
    keys, want = [], 2 * table.MIN_SIZE // 4 + 1
    candidate = 0
    while len(keys) < want:
        candidate += 1
        if home(candidate) & (size - 1) >= size - 8 or home(candidate) & (size - 1) < 4:
            keys.append(candidate)
    keys += list(range(10_000_000, 10_000_000 + table.MIN_SIZE // 2 - len(keys) + 1))
    for row, key in enumerate(keys):
        table.insert(key, row)
    assert len(table.entries) == size
    for row, key in enumerate(keys):
        assert table.entries[table._find(key)].tolist() == [key, row + 1]
