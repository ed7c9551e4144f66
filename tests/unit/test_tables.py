"""The open-addressing tables the C kernels read: every key found, probes short for the keys
they really get (row keys are ``slot * 2**17 + rest``: one question type's rows differ only in
their high bits, which once put them all on one chain and made reranks quadratic)."""

from __future__ import annotations

import random

import numpy as np

from heaprank import Reranker
from heaprank._accel.tables import OpenTable, RowTable, home

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
