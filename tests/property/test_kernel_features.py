"""The features stage's kernel (``heaprank._accel._features``) against the Python passes.

``shape_rows`` builds the rows :meth:`FeatureSpace.rows` builds, and the :class:`ShapeTable`
the kernel reads holds exactly the shapes the shape cache holds, under the keys
:meth:`FeatureSpace.shape_keys` gives. The tables are bytearrays Python can write: whatever
they hold, the kernel reads no address from them and defers on what it does not take.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank._accel.tables import ShapeTable, word_bloom
from heaprank.model.features import N_STRUCTURE_CODES, NO_STRUCTURE
from heaprank.model.questions import PERSONS, analyze_query
from heaprank.scoring.space import FeatureSpace
from tests.property.kernels import stage_kernels
from tests.strategies import KINDS, QUERIES, SOURCES, batch_of, candidate_lists, queries, texts

FEATURES = stage_kernels("features")
#: rows()'s options for candidates without neighbours, tag slots or document features
PLAIN: dict[str, Any] = {"structure": None, "tag_slots": (), "doc_features": False}


@given(text=st.one_of(texts, st.text(min_size=1990, max_size=2010)),
       kind=st.one_of(st.none(), st.sampled_from(KINDS)),
       source=st.one_of(st.none(), st.sampled_from(SOURCES)),
       prefix=st.sampled_from([100, 2000]))
def test_a_shape_key_is_the_tuple_hash_the_shape_cache_uses(text, kind, source, prefix):
    space = FeatureSpace(prefix_chars=prefix)
    assert space.shape_keys((text,), (kind,), (source,)) == (hash((text[:prefix], kind, source)),)


def test_the_kernel_defers_on_a_shape_key_that_is_not_an_int():
    space = FeatureSpace()
    query = analyze_query("Where is it?")
    batch = batch_of(("a",), ("in Lisbon",))
    space.rows(query, batch, **PLAIN)
    assert _served(space, query, batch, _tables(space)) is not None
    for keys in ((1.5,), (-1,), (2**64,), ("a",)):
        assert _served(space, query, batch, _tables(space), keys) is None


@given(ops=st.lists(st.tuples(st.booleans(), st.integers(-40, 40)), max_size=300))
def test_the_shape_table_holds_what_a_dict_holds(ops):
    """Inserts and discards (many colliding: small keys over a small table) leave the table
    holding exactly the keys a dict would, each findable from its home."""
    table, model = ShapeTable(), {}
    words = frozenset({"w"})
    for insert, key in ops:
        key *= 1024  # every key's home is 0: one long probe run, the worst case for discards
        if insert:
            table.insert(key, 8192 * abs(key), words)
            model[key] = 8192 * abs(key)
        else:
            table.discard(key)
            model.pop(key, None)
        assert len(table) == len(model)
    for key, slot in model.items():
        at = table._find(key)
        assert table.entries[at, 0] == key and table.entries[at, 1] == slot + 1
    held = table.entries[table.entries[:, 1] != 0]
    assert sorted(held[:, 0].tolist()) == sorted(model)


def test_the_shape_table_grows_past_half_full():
    table = ShapeTable()
    words = frozenset()
    for key in range(3 * ShapeTable.MIN_SIZE):
        table.insert(key * 7919, key * 8192, words)
    assert len(table) == 3 * ShapeTable.MIN_SIZE
    assert len(table.entries) >= 2 * len(table)
    assert all(table.entries[table._find(key * 7919), 1] == key * 8192 + 1
               for key in range(3 * ShapeTable.MIN_SIZE))


@given(words=st.frozensets(st.text(max_size=6), max_size=12),
       names=st.frozensets(st.text(max_size=6), max_size=4))
def test_a_bloom_without_common_bits_means_no_common_word(words, names):
    if word_bloom(words) & word_bloom(names) == 0:
        assert words.isdisjoint(names)


# ------------------------------------------------------------------- shape_rows


def reference_space(**kwargs: Any) -> FeatureSpace:
    """A feature space on the Python passes only."""
    space = FeatureSpace(**kwargs)
    space._table = None
    return space


_STRUCTURES = [None, "none", "mixed"]


def _structure(kind: str | None, n: int, rng: np.random.Generator) -> Any:
    if kind is None:
        return None
    if kind == "none":
        return [NO_STRUCTURE] * n
    return rng.integers(N_STRUCTURE_CODES, size=n).tolist()  # neighbour and first-stage slots


@given(cands=candidate_lists(min_size=1, max_size=20, scored=None),
       questions=st.lists(st.one_of(st.sampled_from(QUERIES), queries), min_size=1, max_size=4),
       structure=st.sampled_from(_STRUCTURES), speaker_roles=st.booleans(),
       max_bytes=st.sampled_from([64 * 2**20, 3_000]), seed=st.integers(0, 2**16))
def test_kernel_rows_name_the_python_rows_features(cands, questions, structure, speaker_roles,
                                                   max_bytes, seed):
    """Over a few questions, each twice (built, then served from the caches, evicting when
    the bound is small), the kernel's rows name what the Python passes' rows name, and once
    the shapes are cached the kernel serves them."""
    kernel, python = FeatureSpace(max_bytes=max_bytes), reference_space(max_bytes=max_bytes)
    rng = np.random.default_rng(seed)
    batch = batch_of([c["id"] for c in cands], [c["text"] for c in cands],
                     [c["metadata"].get("kind") or None for c in cands],
                     [c["metadata"].get("source") or None for c in cands])
    nbrs = _structure(structure, len(cands), rng)
    for question in questions * 2:
        query = analyze_query(question)
        options = {"structure": nbrs, "tag_slots": (), "doc_features": False,
                   "speaker_roles": speaker_roles}
        got, of = kernel.rows(query, batch, **options)
        want, want_of = python.rows(query, batch, **options)
        assert [kernel.names_of(r) for r in got[of]] == [python.names_of(r) for r in want[want_of]]
        assert (of == want_of).all()
        if max_bytes > 2**20:  # the person code as rows() passes it
            person = 1 + PERSONS.index(query.person) if speaker_roles else 0
            assert kernel._rows_kernel(query, batch, nbrs, person) is not None
    assert sorted(kernel._table.entries[kernel._table.entries[:, 1] != 0][:, 0].tolist()) == \
        sorted(kernel._shapes)
    held = kernel._row_table.entries[kernel._row_table.entries[:, 1] != 0]
    assert {key: row - 1 for key, row in held.tolist()} == \
        {key: row for key, row in kernel._rows.items() if type(key) is int}


def test_a_new_shape_is_featurised_by_the_python_pass_then_served_by_the_kernel():
    space = FeatureSpace()
    query = analyze_query("When did Maya fly to Lisbon?")
    batch = batch_of(("a", "b"), ("Maya flew to Lisbon on March 3", "I like tea"),
                     ("fact", None), ("maya", None))
    assert space._rows_kernel(query, batch, None, 0) is None  # not cached
    first = space.rows(query, batch, **PLAIN)
    served = space._rows_kernel(query, batch, None, 0)
    assert served is not None
    assert [space.names_of(r) for r in served[0][served[1]]] == \
        [space.names_of(r) for r in first[0][first[1]]]
    assert any("qent:yes" in space.names_of(r) for r in served[0])  # Maya and Lisbon


@pytest.mark.parametrize("question", ["What did Maya say?", "What did maya de souza say?",
                                      "What did the user say?"])
def test_a_source_the_question_names_is_found_past_the_bloom(question):
    space, python = FeatureSpace(), reference_space()
    query = analyze_query(question)
    batch = batch_of(("a", "b", "c"), ("I like tea", "I like tea", "We met at noon"),
                     (None, None, "fact"), ("Maya", "de Souza", None))
    for _ in range(2):
        got, want = space.rows(query, batch, **PLAIN), python.rows(query, batch, **PLAIN)
        assert [space.names_of(r) for r in got[0][got[1]]] == \
            [python.names_of(r) for r in want[0][want[1]]]
    assert space._rows_kernel(query, batch, None, 0) is not None


def test_forgetting_clears_the_table_with_the_shapes():
    space = FeatureSpace()
    query = analyze_query("Where is it?")
    space.rows(query, batch_of(("a",), ("in Lisbon",)), **PLAIN)
    assert len(space._table) == 1 and len(space._row_table) == 1
    space.clear()
    assert len(space._table) == 0 and not space._shapes and not space._slot_words
    assert len(space._row_table) == 0 and not space._rows and not space._slot_blooms


# ------------------------------------------------------------------- what the tables hold


def _tables(space: FeatureSpace) -> tuple[Any, ...]:
    table = space._table
    return (table.buffer, table.words, space._slot_words, space._slot_blooms,
            space._row_table.buffer)


def _served(space: FeatureSpace, query: Any, batch: Any, tables: tuple[Any, ...],
            keys: tuple[Any, ...] | None = None) -> Any:
    blooms = query.blooms
    if keys is None:
        keys = space.shape_keys(batch.texts, batch.kinds, batch.sources)
    return FEATURES.shape_rows(tables, keys, (query.names, blooms[0], query.words, blooms[1]),
                               None, 1)


def test_the_shape_table_holds_indexes_of_its_word_sets_not_addresses():
    table = ShapeTable()
    first, second = frozenset({"lisbon"}), frozenset({"tea"})
    table.insert(7, 8192, first)
    table.insert(9, 8192, second)
    assert table.words == [first, second]
    assert table.entries[table._find(7), 3] == 0 and table.entries[table._find(9), 3] == 1
    table.discard(7)
    assert table.words == [None, second]
    table.insert(11, 8192, first)  # the free place is taken again
    assert table.entries[table._find(11), 3] == 0 and table.words[0] is first
    table.insert(11, 8192, second)  # the same key again: its place kept
    assert table.words == [second, second] and len(table) == 2


@pytest.mark.parametrize("index", [-1, 2**40, 5, 2**63 - 1, -(2**63)])
def test_a_word_set_index_python_wrote_past_the_list_defers(index):
    """Whatever Python writes into the table, the kernel reads an index it bounds-checks (the
    list of word sets), never an address: a bad index defers, a good one is served."""
    space = FeatureSpace()
    query = analyze_query("When did Maya fly to Lisbon?")
    batch = batch_of(("a",), ("Maya flew to Lisbon",))
    space.rows(query, batch, **PLAIN)
    tables = _tables(space)
    assert _served(space, query, batch, tables) is not None
    at = np.flatnonzero(space._table.entries[:, 1])[0]
    space._table.entries[at, 3] = index
    assert _served(space, query, batch, tables) is None
    space._table.words[:] = [None] * len(space._table.words)  # or no word set at the index
    space._table.entries[at, 3] = 0
    assert _served(space, query, batch, tables) is None


@pytest.mark.parametrize("column, value", [(1, -5), (1, 2**62), (2, -1), (0, 12345)])
def test_any_entry_python_wrote_is_bounded_or_deferred(column, value):
    """A slot key out of range defers; a full table of one key stops its probe; a changed key
    is a shape not cached."""
    space = FeatureSpace()
    query = analyze_query("Where is it?")
    batch = batch_of(("a", "b"), ("in Lisbon", "at home"))
    space.rows(query, batch, **PLAIN)
    tables = _tables(space)
    space._table.entries[:, column] = value  # every entry, the empty ones too
    made = _served(space, query, batch, tables)
    assert made is None or column == 2  # a bloom is only a hint: the sets decide


def test_the_kernel_leaves_no_export_of_the_tables_behind():
    """The kernel exports the bytearrays for its call, so none can be resized meanwhile; after
    it they can (a copy of the shape table here: the table's own numpy view exports it too)."""
    space = FeatureSpace()
    query = analyze_query("Where is it?")
    batch = batch_of(("a",), ("in Lisbon",))
    space.rows(query, batch, **PLAIN)
    tables = (bytearray(space._table.buffer), *_tables(space)[1:])
    assert _served(space, query, batch, tables) is not None
    tables[0].extend(b"\0" * 32)  # no export left behind
    assert _served(space, query, batch, tables) is None  # not a power of two: deferred
