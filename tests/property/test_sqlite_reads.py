"""SQLiteState's reads by position (each asked name's row, in the order asked) give exactly what
MemoryState gives for the same state: duplicates, unknown names and names that need a JSON
escape included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from heaprank import Candidate, MemoryState, Reranker, SQLiteState
from heaprank.state.copy import copy_state
from tests.strategies import NOW

# No NUL: SQLite's json_each ends a string at "\u0000", so a name holding one is never found
# (a known limit of the SQLite reads, before and after they went by position).
names = st.one_of(st.sampled_from(['"', "\\", "a\"b", "tab\there", "é", "", "doc:x", "kind:fact"]),
                  st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                 blacklist_characters="\x00"), max_size=8))
doc_ids = names.filter(lambda name: name.strip() != "")  # a candidate's id is never blank


def _learned(ids: list[str], used: list[list[int]]) -> MemoryState:
    rr = Reranker(MemoryState())
    pool = [Candidate(i, f"note {n} about the flight", float(len(ids) - n),
                      {"kind": ("fact", "note")[n % 2], "created_at": NOW - 3600 * n})
            for n, i in enumerate(ids)]
    for t, chosen in enumerate(used):
        ranking = rr.rerank("When is the flight?", pool, namespace="a", now=NOW + t)
        rr.feedback(ranking.recall_id, used=[ranking.ids[r % len(ranking)] for r in chosen])
    return rr.state  # type: ignore[return-value]


@settings(max_examples=60, deadline=None)
@given(st.lists(doc_ids, min_size=1, max_size=6, unique=True),
       st.lists(st.lists(st.integers(0, 5), max_size=3), min_size=1, max_size=4),
       st.data())
def test_reads_by_position_equal_the_memory_reads(ids, used, data):
    memory = _learned(ids, used)
    sqlite = SQLiteState(":memory:")
    try:
        copy_state(memory, sqlite)
        features = memory.list_links(None)[0]
        asked_ids = data.draw(st.lists(st.one_of(st.sampled_from(ids), names), max_size=12))
        asked_features = data.draw(st.lists(st.one_of(st.sampled_from(features), names),
                                            max_size=12) if features else st.lists(names))
        for namespace in ("a", "nobody"):
            dm, ds = memory.read_docs(namespace, asked_ids), sqlite.read_docs(namespace, asked_ids)
            np.testing.assert_array_equal(dm.last_used, ds.last_used)
            np.testing.assert_array_equal(dm.use_count, ds.use_count)
            (cm, dm), (cs, ds) = (memory.read(namespace, asked_features, asked_ids),
                                  sqlite.read(namespace, asked_features, asked_ids))
            for field in ("pos", "neg", "gpos", "gneg"):
                assert getattr(cm, field).tolist() == getattr(cs, field).tolist()
            np.testing.assert_array_equal(dm.last_used, ds.last_used)
            np.testing.assert_array_equal(dm.use_count, ds.use_count)
            assert len(ds.last_used) == len(asked_ids) and len(cs.pos) == len(asked_features)
    finally:
        sqlite.close()
