"""The C kernels (``heaprank._accel._kernels``) against their pure-Python twins.

A kernel either gives exactly what its twin gives or defers (returns None) so the twin runs:
``coerce_columns`` builds the batch the checked path builds, ``shape_rows`` the rows
:meth:`FeatureSpace.rows` builds, and the :class:`ShapeTable` the kernel reads holds exactly the
shapes the shape cache holds. The kernels are optional (an install without a C compiler runs
the twins only); with ``HEAPRANK_REQUIRE_SPEEDUPS=1`` (``.ci/run`` sets it) their absence is a
failure instead of a skip (but under ``HEAPRANK_PURE_PYTHON=1``, which turns them off).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heaprank import _accel
from heaprank.scoring.candidates import coerce_c, coerce_checked, coerce_fast
from heaprank._accel.tables import ShapeTable, word_bloom
from heaprank.scoring.features import FIXED_SLOTS, NO_NEIGHBOURS
from heaprank.scoring.query import PERSONS, analyze_query
from heaprank.scoring.space import FeatureSpace
from heaprank.state import codec
from tests.property.test_codec_encode import _reference_encode, doubles, impressions
from tests.property.test_coerce_paths import assert_same_batch, uniform_candidate_lists
from tests.strategies import (
    KINDS,
    NOW,
    QUERIES,
    SOURCES,
    TEXTS,
    WILD_TARGETS,
    candidate_lists,
    clean_candidate,
    near_clean_candidate_lists,
    queries,
    texts,
    wild_candidate_lists,
)

if _accel.speedups is None:
    if os.environ.get("HEAPRANK_REQUIRE_SPEEDUPS") == "1" and \
            os.environ.get(_accel.PURE_PYTHON_ENV, "") in ("", "0"):
        pytest.fail("HEAPRANK_REQUIRE_SPEEDUPS=1 but heaprank._accel._kernels did not build or load "
                    "(is a C compiler installed? pip install -e . rebuilds it)",
                    pytrace=False)
    pytest.skip("heaprank._accel._kernels is not built (or HEAPRANK_PURE_PYTHON is set): the "
                "pure-Python passes are tested everywhere else", allow_module_level=True)


# ------------------------------------------------------------------- coerce_columns


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


@given(items=candidate_lists(scored=None), as_objects=st.booleans())
def test_the_kernel_takes_clean_candidates_and_dicts(items, as_objects):
    items = [clean_candidate(item, as_objects) for item in items]
    assert check_kernel_batch(items) is not None


@given(items=candidate_lists(scored=None), as_objects=st.booleans(),
       tags=st.sampled_from([None, "travel", "", ["a", "b", ""], ("x",), []]),
       key=st.sampled_from(["plan", 7, "", None]), superseded=st.sampled_from([True, False]))
def test_the_kernel_takes_tags_int_keys_and_flags(items, as_objects, tags, key, superseded):
    for item in items:
        item["metadata"].update(tags=tags, key=key, thread=key, superseded=superseded)
    items = [clean_candidate(item, as_objects) for item in items]
    assert check_kernel_batch(items) is not None


@pytest.mark.parametrize("items", [
    [],
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

    items = [{"id": "a", "text": "t", "metadata": {Key("kind"): "fact"}}]
    assert coerce_c(items, now=NOW) is None
    assert coerce_checked(items, now=NOW).kinds == ("fact",)


def test_the_kernel_agrees_with_the_fast_path_on_the_latency_benchmarks_candidates():
    items = [clean_candidate({"id": f"m{i}", "text": TEXTS[i % len(TEXTS)], "score": i / 7,
                              "metadata": {"created_at": NOW - 3600 * i, "kind": KINDS[i % 5],
                                           "source": SOURCES[i % 4]}}, True)
             for i in range(50)]
    assert_same_batch(coerce_c(items, now=NOW), coerce_fast(items, now=NOW))


# ------------------------------------------------------------------- shape_key, ShapeTable


@given(text=st.one_of(texts, st.text(min_size=1990, max_size=2010)),
       kind=st.one_of(st.none(), st.sampled_from(KINDS)),
       source=st.one_of(st.none(), st.sampled_from(SOURCES)),
       prefix=st.sampled_from([100, 2000]))
def test_the_kernels_shape_key_is_pythons_tuple_hash(text, kind, source, prefix):
    assert _accel.speedups.shape_key(text, kind, source, prefix) == hash((text[:prefix], kind,
                                                                           source))


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
        return [NO_NEIGHBOURS] * n
    buckets = ["top1", "top3", "top10", "lower", "none"]
    return [(f"prev:{buckets[rng.integers(5)]}", f"next:{buckets[rng.integers(5)]}")
            for _ in range(n)]


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
    ids = tuple(c["id"] for c in cands)
    texts_ = tuple(c["text"] for c in cands)
    kinds = tuple(c["metadata"].get("kind") for c in cands)
    sources = tuple(c["metadata"].get("source") for c in cands)
    tags = (frozenset(),) * len(cands)
    nbrs = _structure(structure, len(cands), rng)
    for question in questions * 2:
        query = analyze_query(question)
        args = (query, ids, texts_, kinds, sources, tags, (), False, nbrs, speaker_roles)
        got, of = kernel.rows(*args)
        want, want_of = python.rows(*args)
        assert [kernel.names_of(r) for r in got[of]] == [python.names_of(r) for r in want[want_of]]
        assert (of == want_of).all()
        if max_bytes > 2**20:  # the person code as rows() passes it
            person = 1 + PERSONS.index(query.person) if speaker_roles else 0
            assert kernel._rows_kernel(query, texts_, kinds, sources, nbrs, person) is not None
    assert sorted(kernel._table.entries[kernel._table.entries[:, 1] != 0][:, 0].tolist()) == \
        sorted(kernel._shapes)
    held = kernel._row_table.entries[kernel._row_table.entries[:, 1] != 0]
    assert {key: row - 1 for key, row in held.tolist()} == \
        {key: row for key, row in kernel._rows.items() if type(key) is int}


def test_a_new_shape_is_featurised_by_the_python_pass_then_served_by_the_kernel():
    space = FeatureSpace()
    query = analyze_query("When did Maya fly to Lisbon?")
    args = (query, ("a", "b"), ("Maya flew to Lisbon on March 3", "I like tea"),
            ("fact", None), ("maya", None), (frozenset(),) * 2, (), False, None)
    assert space._rows_kernel(query, args[2], args[3], args[4], None, 0) is None  # not cached
    first = space.rows(*args)
    served = space._rows_kernel(query, args[2], args[3], args[4], None, 0)
    assert served is not None
    assert [space.names_of(r) for r in served[0][served[1]]] == \
        [space.names_of(r) for r in first[0][first[1]]]
    assert any("qent:yes" in space.names_of(r) for r in served[0])  # Maya and Lisbon


@pytest.mark.parametrize("question", ["What did Maya say?", "What did maya de souza say?",
                                      "What did the user say?"])
def test_a_source_the_question_names_is_found_past_the_bloom(question):
    space, python = FeatureSpace(), reference_space()
    query = analyze_query(question)
    args = (query, ("a", "b", "c"), ("I like tea", "I like tea", "We met at noon"),
            (None, None, "fact"), ("Maya", "de Souza", None), (frozenset(),) * 3, (), False,
            None)
    for _ in range(2):
        got, want = space.rows(*args), python.rows(*args)
        assert [space.names_of(r) for r in got[0][got[1]]] == \
            [python.names_of(r) for r in want[0][want[1]]]
    assert space._rows_kernel(query, args[2], args[3], args[4], None, 0) is not None


def test_forgetting_clears_the_table_with_the_shapes():
    space = FeatureSpace()
    query = analyze_query("Where is it?")
    space.rows(query, ("a",), ("in Lisbon",), (None,), (None,), (frozenset(),), (), False, None)
    assert len(space._table) == 1 and len(space._row_table) == 1
    space.clear()
    assert len(space._table) == 0 and not space._shapes and not space._slot_words
    assert len(space._row_table) == 0 and not space._rows and not space._slot_blooms


# ------------------------------------------------------------------- the switch


def test_heaprank_pure_python_turns_the_kernels_off():
    code = ("from heaprank import _accel; from heaprank.scoring import candidates, space; "
            "print(_accel.speedups, _accel.shape_rows_kernel, space.FeatureSpace()._table)")
    env = {**os.environ, "HEAPRANK_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["None", "None", "None"]


# ------------------------------------------------------------------- encode_items


@given(data=st.data())
def test_the_kernels_impression_bytes_are_the_frozen_encoders(data):
    """Rows of codebook slots as the reranker hands them (one tuple object per row, seen
    before): the kernel encodes the items and values, byte for byte what the frozen encoder
    of tests/property/test_codec_encode.py gives."""
    imp = data.draw(impressions())
    n, m = len(imp["ids"]), len(imp["signal_names"])
    pool = [tuple(data.draw(st.lists(st.sampled_from(FIXED_SLOTS), max_size=8)))
            for _ in range(3)]
    imp["slots"] = tuple(pool[data.draw(st.integers(0, 2))] for _ in range(n))
    if data.draw(st.booleans()):
        imp["signals"] = np.array([[data.draw(doubles) for _ in range(m)] for _ in range(n)],
                                  dtype=np.float64).reshape(n, m)
    else:
        imp["signals"] = None
    expected = _reference_encode(**imp)
    assert codec.encode(**imp) == expected  # the rows are known by identity from here on
    assert codec.encode_items(imp["ids"], imp["slots"], codec._ROWS_BY_ID,
                              imp["signals"]) is not None or n == 0
    assert codec.encode(**imp) == expected


@given(data=st.data())
def test_rows_with_free_form_slots_take_the_kernel_with_their_codes_of_this_impression(data):
    """Rows with a caller's own slots (sources, tags) are coded per impression, so never known
    by identity: the kernel takes their codes for this impression (more_rows), worked out in
    item order, and the bytes are still the frozen encoder's."""
    imp = data.draw(impressions())
    n = len(imp["ids"])
    free = st.sampled_from(["source:anna", "source:ben", "tag:x", "source:zoë"])
    pool = [tuple(data.draw(st.lists(st.sampled_from(FIXED_SLOTS) | free, max_size=6)))
            for _ in range(4)]
    imp["slots"] = tuple(pool[data.draw(st.integers(0, 3))] for _ in range(n))
    imp["signals"] = None
    expected = _reference_encode(**imp)
    assert codec.encode(**imp) == expected
    table: dict[str, int] = {}
    more = codec._rows_of_this(imp["slots"], table)
    assert codec.encode_items(imp["ids"], imp["slots"], codec._ROWS_BY_ID, None,
                              more) is not None or n == 0
    assert codec.encode(**imp) == expected


# ------------------------------------------------------------------- instances


@given(values=st.lists(st.tuples(st.floats(allow_nan=False), st.text(max_size=3)), max_size=5))
def test_the_kernels_results_are_the_results_the_python_constructor_makes(values):
    from heaprank import Candidate
    from heaprank.scoring.results import _SLOTS, Ranked, ResultSource, new_ranked, new_ranked_many

    source = ResultSource(("relevance",), None, [[0.5]] * len(values), [0] * len(values), {})
    rows = [(rank, score, Candidate(text or "x", "t"), {"relevance": score}, {"relevance": 1.0},
             source, (("f", 0.5),), (), (text,), None)
            for rank, (score, text) in enumerate(values, start=1)]
    made = new_ranked_many(rows)
    assert _accel.speedups.instances(Ranked, _SLOTS, rows) is not None
    want = [new_ranked(*row) for row in rows]
    assert made == want and [repr(a) for a in made] == [repr(b) for b in want]
    assert all(type(a) is Ranked for a in made)


def test_the_kernel_builds_no_instance_of_a_class_it_was_not_given_the_slots_of():
    from heaprank.scoring.results import _SLOTS, Ranked

    class Other:
        __slots__ = ("a",)

    assert _accel.speedups.instances(Other, _SLOTS, [()]) is None
    assert _accel.speedups.instances(Ranked, (Ranked.__dict__["rank"], 3), [(1, 2)]) is None


# ------------------------------------------------------------------- doc_stats


@given(docs=st.dictionaries(st.sampled_from(["a", "b", "c", "Zoë", "d-1"]),
                            st.tuples(st.floats(allow_infinity=False), st.floats(0, 1e6)),
                            max_size=5),
       ids=st.lists(st.sampled_from(["a", "b", "c", "Zoë", "d-1", "x"]), min_size=1, max_size=8,
                    unique=True))
def test_the_kernels_document_stats_are_the_python_reads(docs, ids):
    from heaprank import MemoryState
    from heaprank.state import memory
    state = MemoryState()
    state._namespace("ns").docs.update(docs)
    got = state.read_docs("ns", tuple(ids))
    kernel, memory.doc_kernel = memory.doc_kernel, None
    try:
        want = state.read_docs("ns", tuple(ids))
    finally:
        memory.doc_kernel = kernel
    assert kernel(docs, tuple(ids)) is not None
    for a, b in ((got.last_used, want.last_used), (got.use_count, want.use_count)):
        assert a.dtype == b.dtype == np.float64 and a.shape == b.shape == (len(ids),)
        assert np.array_equal(a, b, equal_nan=True)


# ------------------------------------------------------------------- shown_rows

#: Feature rows by their slots, as a reranker hands them (one tuple object per row)
_ROW_SLOTS = [("kind:fact", "src:chat"), ("kind:note",), ("kind:fact", "src:mail"), ("kind:x",)]


def _loop_rows(state, ids, slots, used, qtype, weights):
    """What the Python loop of apply_used hands to _learn: (rejected rows and their summed
    weights, used rows), and the verdicts."""
    from heaprank.learning.links import Prior

    handed = []
    state._learn = lambda ns, rejected, used_rows, em, learning: handed.append(
        (rejected, used_rows))
    verdicts = state._learn_shown(state._namespace("ns"), ids, slots, qtype, False, used, None,
                                  False, Prior(), weights, lambda rank: 1.0)
    del state._learn
    return handed[0], verdicts


@given(plan=st.lists(st.tuples(st.integers(0, len(_ROW_SLOTS) - 1), st.booleans()), min_size=1,
                     max_size=12),
       weights=st.lists(st.floats(1e-3, 4.0), min_size=13, max_size=13))
def test_the_kernels_shown_rows_are_the_rows_the_python_loop_makes(plan, weights):
    """Repeated rows, any used subset, any weights: the same rows in the same order, the same
    summed weights to the bit, the same verdicts; a row is the one object both find."""
    from heaprank import MemoryState

    state = MemoryState()
    ids = tuple(f"d{i}" for i in range(len(plan)))
    slots = tuple(_ROW_SLOTS[j] for j, _ in plan)
    used = {d for d, (_, is_used) in zip(ids, plan) if is_used}
    table = [math.inf, *weights]
    (rejected, used_rows), verdicts = _loop_rows(state, ids, slots, used, "who", table)
    got = _accel.speedups.shown_rows(ids, slots, used, state._rows_by_slots, "who", table)
    assert got is not None
    raws, sums, rows, positions, kernel_verdicts = got
    assert raws == [row.raw for row in rejected] + [row.raw for row, _ in used_rows]
    assert [s.hex() for s in sums] == [w.hex() for w in rejected.values()]
    assert all(a is b for a, (b, _) in zip(rows, used_rows, strict=True))
    assert positions == [i for i, d in enumerate(ids) if d in used]
    assert list(kernel_verdicts) == verdicts


def test_the_kernels_shown_rows_defer_to_the_loop_where_it_must_run():
    from heaprank import MemoryState

    state = MemoryState()
    ids, slots, table = ("a", "b"), (_ROW_SLOTS[0], _ROW_SLOTS[1]), [math.inf, 1.0, 0.5]
    kernel = _accel.speedups.shown_rows
    assert kernel(ids, slots, {"a"}, state._rows_by_slots, "who", table) is None  # rows unknown
    _loop_rows(state, ids, slots, {"a"}, "who", table)
    by_slots = state._rows_by_slots
    assert kernel(ids, slots, {"a"}, by_slots, "who", table) is not None
    assert kernel(ids, slots, {"a"}, by_slots, "when", table) is None  # another question type
    assert kernel(ids, slots, {"a"}, by_slots, "who", table[:2]) is None  # too few weights
    assert kernel(ids, slots, set(), by_slots, "who", [math.inf, 1.0, 1]) is None  # an int
    assert kernel(list(ids), slots, {"a"}, by_slots, "who", table) is None  # not a tuple
    copy = (tuple(list(_ROW_SLOTS[0])), _ROW_SLOTS[1])  # equal slots, another object
    assert kernel(ids, copy, {"a"}, by_slots, "who", table) is None


def test_a_fresh_feedback_takes_the_kernels(monkeypatch):
    """The lean feedback runs its rows through shown_rows once its rows are known."""
    from heaprank import Reranker
    from heaprank.state import memory
    from tests.strategies import POOL

    calls = []
    kernel = memory.rows_kernel

    def counted(*args):
        out = kernel(*args)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(memory, "rows_kernel", counted)
    rr = Reranker()
    for t in range(3):
        ranking = rr.rerank("when is my flight", POOL, namespace="ana", k=4, now=NOW + t)
        rr.feedback(ranking.recall_id, used=[ranking.ids[0]], now=NOW + t)
    assert calls[0] is False and calls[-1] is True


# ------------------------------------------------------------------- learn_known's credit

#: Means that make the exact sum work: near 1 (terms of -37), tiny, equal ones (ties), zeros.
_MEANS = st.one_of(st.floats(0.0, 1.0), st.sampled_from([
    0.0, 1.0, 1e-300, 5e-324, 0.5, 1 - 2**-53, 1 - 2**-52, 0.999999999, 1e-12, 0.1, 0.2, 0.3]))


@settings(max_examples=1000)
@given(means=st.lists(_MEANS, min_size=1, max_size=200))
def test_the_kernels_noisy_or_total_is_used_total_to_the_bit(means):
    """U = 1 - prod(1 - p) from the log terms summed exactly: math.fsum in Python, Shewchuk's
    partials in C; fsum is correctly rounded, so the two must give the same bits."""
    from heaprank.learning import links as linkmath
    got = _accel.speedups.used_total(np.array(means))
    assert got is not None
    want = linkmath.used_total(means)
    assert got == want or (got != got and want != want), (got, want)
    assert np.float64(got).tobytes() == np.float64(want).tobytes()


def test_the_kernels_noisy_or_total_refuses_what_it_does_not_take():
    assert _accel.speedups.used_total(np.array([0.5, 1.5])) is None
    assert _accel.speedups.used_total(np.array([math.nan])) is None
    assert _accel.speedups.used_total(np.full(300, 0.5)) is None  # past what it holds


#: Sums whose rounding is decided far below the largest term: ties broken half to even across
#: partials, cancellation, subnormals.
_SUM_EDGES = [[1.0, 2**-53, 2**-106], [1.0, 2**-53, -(2**-106)], [1.0, -(2**-54), -(2**-107)],
              [1e308, 1e308, -1e308], [2**-1074] * 3, [1.0, 1e100, 1.0, -1e100],
              [0.1] * 10, [-0.0], [-0.0, 0.0], [], [3.0, 2**-52, 2**-105, 2**-158]]


@settings(max_examples=1000)
@given(values=st.one_of(st.sampled_from(_SUM_EDGES),
                        st.lists(st.floats(allow_nan=False, allow_infinity=False,
                                           min_value=-1e300, max_value=1e300), max_size=40),
                        st.lists(st.sampled_from([1.0, -1.0, 2**-53, -(2**-53), 2**-106, 3.5,
                                                  1e16, -1e16, 0.1, -0.0]), max_size=20)))
def test_the_kernels_exact_sum_is_math_fsum_to_the_bit(values):
    got = _accel.speedups.fsum(np.array(values, dtype=np.float64))
    try:
        want = math.fsum(values)
    except OverflowError:  # past the float range midway: the kernel defers
        assert got is None
        return
    assert got is not None
    assert np.float64(got).tobytes() == np.float64(want).tobytes(), (got, want)


# ------------------------------------------------------------------- details_of

_ANY_FLOAT = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=500)
@given(data=st.data(), n=st.integers(1, 10), intent=st.sampled_from(["none", "recent"]))
def test_the_kernels_explain_details_are_the_python_ones(data, n, intent):
    """Every number as Python's formatting writes it: scores of any size and sign, ages in
    days from none to centuries, use and source counts of any size, kinds of any script."""
    from types import SimpleNamespace

    from heaprank import Config, Reranker
    from heaprank import reranker as module
    def column(values: Any) -> list[float]:
        return [float(v) for v in data.draw(st.lists(values, min_size=n, max_size=n))]

    scores = column(_ANY_FLOAT)
    importance = column(st.one_of(st.just(math.nan), _ANY_FLOAT))
    sources = column(st.one_of(st.just(math.nan), st.floats(0, 1e300)))
    ages = column(st.one_of(st.just(math.nan), st.floats(-1e3, 3e10), st.sampled_from([0.0, -0.0])))
    uses = column(st.one_of(st.sampled_from([0.0, 1.0, 2.5]), st.floats(0, 1e300)))
    kinds = tuple(data.draw(st.lists(st.sampled_from([None, "fact", "Zoë's", "会议", "x" * 40]),
                                     min_size=n, max_size=n)))
    positions = list(range(n))
    cfg = Config(intent_recency={"recent": 2.0})
    info = SimpleNamespace(has_content=True, intent=intent)
    batch = SimpleNamespace(kinds=kinds, scores=np.array(scores))
    rows_c, rows_py = [[0.5] for _ in range(n)], [[0.5] for _ in range(n)]
    args = (positions, scores, importance, sources, ages, uses)
    Reranker._details(batch, info, cfg, positions, rows_c, *args[1:])
    kernel, module.details_kernel = module.details_kernel, None
    try:
        Reranker._details(batch, info, cfg, positions, rows_py, *args[1:])
    finally:
        module.details_kernel = kernel
    assert rows_c == rows_py
    asks = ", asks for recent" if intent == "recent" else ""
    assert kernel([[0.5] for _ in range(n)], positions, scores, importance, sources, ages, uses,
                  kinds, asks) is True


def test_a_table_buffer_keeps_the_word_sets_it_points_to_after_a_growth_and_a_discard():
    """A kernel call may hold a buffer that a growth (in another thread) has replaced; a shape
    discarded since must not free the word set that buffer still points to."""
    import gc
    import weakref

    class Words(frozenset):  # a frozenset that can be watched for its end
        pass

    table = ShapeTable()
    words = Words({"lisbon"})
    alive = weakref.ref(words)
    table.insert(7, 8192, words)
    old = table.buffer  # as an in-flight kernel call holds it
    for key in range(1, 2 * ShapeTable.MIN_SIZE):  # grows the table: a new buffer
        table.insert(7 + 1024 * key, 8192, frozenset())
    assert table.buffer is not old
    table.discard(7)
    del words
    gc.collect()
    assert alive() is not None and 7 in old.held  # the old buffer still holds it
    del old
    gc.collect()
    assert alive() is None  # and nothing else did



# ------------------------------------------------------------------- relevance, columns, take, order

#: Scores that make the normalisation's edges: signed zeros, ties, huge spans, subnormals.
_SCORES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-1e3, 1e3),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 1e-300, 5e-324, 1e300, -1e300, 1.7e308, 0.1, 0.3]))


def _bits(array: np.ndarray) -> list[int]:
    return np.ascontiguousarray(array, dtype=np.float64).view(np.int64).tolist()


@settings(max_examples=1000)
@given(scores=st.lists(st.one_of(_SCORES, st.just(math.nan)), min_size=0, max_size=60),
       kind=st.sampled_from(["similarity", "distance"]),
       floor=st.sampled_from([0.0, 0.02, 0.5, 1e-13, 1e-12, 0.999]))
def test_the_kernels_relevance_is_the_numpy_relevance_to_the_bit(scores, kind, floor):
    """The usual case (no NaN, a finite span) in one C pass gives numpy's bits, signed zeros
    and the rounding to 12 decimals included; anything else (a NaN, a span past the float
    range) is left to the numpy lines. (Infinite scores never get here: coercion refuses them.)"""
    from unittest import mock

    from heaprank.scoring import signals as sig
    s = np.array(scores, dtype=np.float64)
    made = _accel.speedups.relevance(s, kind == "distance", floor)
    if not scores:
        assert made is None
        return
    with mock.patch.object(sig, "relevance_kernel", None):
        expected = sig.relevance(s, kind=kind, floor=floor, rank_tau=5.0)
    usual = not np.isnan(s).any() and math.isfinite(float(s.max()) - float(s.min()))
    if usual:
        assert made is not None and _bits(np.frombuffer(made)) == _bits(expected)
        assert _bits(sig.relevance(s, kind=kind, floor=floor, rank_tau=5.0)) == _bits(expected)
    else:
        assert made is None


def test_the_kernels_relevance_defers_on_what_it_does_not_take():
    kernel = _accel.speedups.relevance
    assert kernel(np.arange(3.0)[::2], False, 0.0) is None  # not contiguous
    assert kernel(np.arange(3), False, 0.0) is None  # int64
    assert kernel(np.arange(3.0), 0, 0.0) is None  # not a bool
    assert kernel(np.arange(3.0), False, 0) is None  # not a float
    assert kernel([1.0, 2.0], False, 0.0) is None  # not a buffer
    assert kernel(np.array([1.0, math.inf]), False, 0.0) is None  # an infinite span
    assert kernel(np.array([-1.7e308, 1.7e308]), True, 0.0) is None  # a span past the range


_COLUMN = st.one_of(st.floats(allow_nan=True), st.just("array"))


@given(n=st.integers(0, 12), kinds=st.lists(_COLUMN, max_size=8), data=st.data())
def test_the_kernels_columns_are_the_numpy_matrix(n, kinds, data):
    from unittest import mock

    from heaprank import reranker
    values = tuple(np.array(data.draw(st.lists(_SCORES | st.just(math.nan), min_size=n,
                                                 max_size=n)), dtype=np.float64)
                   if kind == "array" else kind for kind in kinds)
    at = data.draw(st.none() | st.lists(st.integers(0, max(n - 1, 0)), max_size=10).map(
        lambda xs: np.array(xs if n else [], dtype=np.intp)))
    made = reranker._matrix(n, values, at)
    with mock.patch.object(reranker, "columns_kernel", None):
        expected = reranker._matrix(n, values, at)
    assert made.shape == expected.shape and _bits(made.ravel()) == _bits(expected.ravel())
    assert _accel.speedups.columns(n, values, at) is not None


def test_the_kernels_columns_defer_on_what_they_do_not_take():
    kernel, col = _accel.speedups.columns, np.arange(4.0)
    assert kernel(4, (col, 1.0), None) is not None
    assert kernel(3, (col,), None) is None  # another length
    assert kernel(4, (col, 1), None) is None  # an int
    assert kernel(4, (col[::2],), None) is None  # not contiguous
    assert kernel(4, (np.arange(4),), None) is None  # int64
    assert kernel(4, (col,), np.array([0, 4])) is None  # a position out of range
    assert kernel(4, (col,), np.array([-1])) is None
    assert kernel(4, [col], None) is None  # not a tuple


@settings(max_examples=500)
@given(data=st.data(), n=st.integers(0, 80))
def test_the_kernels_order_is_numpys_lexsort(data, n):
    """Best first by log score, ties by relevance, then by position, as the stable lexsort:
    many ties (a few distinct values), signed zeros and the -inf of a dropped candidate."""
    values = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, -math.inf, math.inf, 1e-300])
    score = np.array(data.draw(st.lists(values | st.floats(-5, 5), min_size=n, max_size=n)))
    tie = np.array(data.draw(st.lists(values, min_size=n, max_size=n)))
    made = _accel.speedups.best_first(score.astype(np.float64), tie.astype(np.float64))
    assert np.frombuffer(made, dtype=np.intp).tolist() == np.lexsort((-tie, -score)).tolist()


def test_the_kernels_order_defers_on_nan_and_other_input():
    kernel = _accel.speedups.best_first
    assert kernel(np.array([1.0, math.nan]), np.zeros(2)) is None
    assert kernel(np.zeros(2), np.array([math.nan, 1.0])) is None
    assert kernel(np.zeros(2), np.zeros(3)) is None
    assert kernel(np.zeros(2, dtype=np.intp), np.zeros(2)) is None
    assert np.frombuffer(kernel(np.zeros(3), np.zeros(3)), dtype=np.intp).tolist() == [0, 1, 2]


@given(data=st.data(), n=st.integers(1, 20), width=st.integers(1, 7))
def test_the_kernels_take_is_index_then_tolist(data, n, width):
    at = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=12)), dtype=np.intp)
    floats = np.array(data.draw(st.lists(_SCORES | st.just(math.nan), min_size=n, max_size=n)))
    ints = np.array(data.draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n)),
                    dtype=np.int64)
    matrix = np.array(data.draw(st.lists(_SCORES, min_size=n * width, max_size=n * width)),
                      dtype=np.float64).reshape(n, width)
    columns = (floats, ints, matrix, ints.astype(np.intp))
    made = _accel.speedups.take(at, columns)
    expected = [c[at].tolist() for c in columns]
    assert made[1] == expected[1] and made[3] == expected[3]  # the ints, as Python ints
    assert all(type(x) is int for x in made[1] + made[3])
    assert all(type(x) is float for x in made[0])
    # the floats to the bit (NaN, -0.0), the matrix row by row
    assert _bits(np.array(made[0])) == _bits(np.array(expected[0]))
    assert [len(row) for row in made[2]] == [len(row) for row in expected[2]]
    assert _bits(np.array(made[2]).ravel()) == _bits(np.array(expected[2]).ravel())


def test_the_kernels_take_defers_on_what_it_does_not_take():
    kernel, col = _accel.speedups.take, np.arange(4.0)
    assert kernel(np.array([3]), (col,)) == [[3.0]]
    assert kernel(np.array([4]), (col,)) is None  # out of range
    assert kernel(np.array([-1]), (col,)) is None  # numpy would wrap it: not the kernel's case
    assert kernel(np.array([0]), (col[::2],)) is None  # not contiguous
    assert kernel(np.array([0]), (np.zeros((2, 2, 2)),)) is None  # 3-d
    assert kernel(np.array([0.0]), (col,)) is None  # float positions
    assert kernel(np.array([0]), [col]) is None  # not a tuple


_AGES = st.one_of(st.floats(allow_nan=False), st.just(math.nan), st.sampled_from(
    [0.0, -0.0, -1.0, 1.0, 86400.0, 1e308, -1e308, 5e-324, 3.3e10]))


@settings(max_examples=1000)
@given(ages=st.lists(_AGES, max_size=60),
       half_life=st.sampled_from([1.0, 86400.0, 30 * 86400.0, 1e-300, 1e300, 7.5]),
       floor=st.sampled_from([0.0, 0.05, 0.5, 1e-301, 1e-300, 0.999]))
def test_the_kernels_recency_is_the_numpy_recency_to_the_bit(ages, half_life, floor):
    """Both C passes around numpy's exp2 give the numpy lines' bits: negative ages clamped,
    NaN ages neutral, the 1e-300 floor of a zero floor."""
    from unittest import mock

    from heaprank.scoring import signals as sig
    age = np.array(ages, dtype=np.float64)
    made = sig.recency(age, half_life_s=half_life, floor=floor)
    # (numpy warns of an overflow past the float range where the kernel does not; the bits
    # are the same)
    with mock.patch.object(sig, "halvings_kernel", None), np.errstate(all="ignore"):
        expected = sig.recency(age, half_life_s=half_life, floor=floor)
    assert _bits(made) == _bits(expected)
    powers = _accel.speedups.halvings(age, half_life)
    assert powers is not None and len(powers) == 8 * len(ages)
    assert _accel.speedups.recency_from(powers, floor) is True


def test_the_kernels_recency_defers_on_what_it_does_not_take():
    halvings, recency_from = _accel.speedups.halvings, _accel.speedups.recency_from
    assert halvings(np.arange(4.0)[::2], 1.0) is None  # not contiguous
    assert halvings(np.arange(4.0), 1) is None  # an int half-life
    assert recency_from(bytearray(12), 0.0) is None  # not whole floats
    assert recency_from(bytes(16), 0.0) is None  # not a bytearray
    assert recency_from(bytearray(16), 0) is None  # an int floor


@given(data=st.data(), n=st.integers(1, 30),
       zero_weights=st.sets(st.integers(0, 5), max_size=3))
def test_a_zero_weight_column_of_ones_needs_no_clearing(data, n, zero_weights):
    """_off skips the mask only where clearing it would change no bit: the zero-weight
    columns hold the constant 1.0, whose log term is +0.0 (a -0.0 weight keeps the mask)."""
    from heaprank import reranker
    from heaprank.config import SIGNALS, Weights
    from heaprank.scoring import signals as sig

    weights = Weights(**{name: 0.0 if j in zero_weights else 1.0 + j
                         for j, name in enumerate(SIGNALS)})
    row = reranker._weight_row.__wrapped__(weights, None)  # (past the cache: see below)
    arrays = [np.array(data.draw(st.lists(st.floats(1e-300, 1e300), min_size=n, max_size=n)))
              for _ in SIGNALS]
    values = tuple(1.0 if j in zero_weights else arrays[j] for j in range(len(SIGNALS)))
    matrix = reranker._matrix(n, values)
    off = reranker._off(row, values)
    assert off is None  # no zero weight, or each one on a column of 1.0
    skipped = sig.combine(matrix, row.array, np.ones(n), no_rule_fired=True, off=off)
    cleared = sig.combine(matrix, row.array, np.ones(n), no_rule_fired=True, off=row.off)
    assert all(_bits(a.ravel()) == _bits(b.ravel()) for a, b in zip(skipped, cleared))
    if zero_weights:  # an array in a zero-weight column, or a -0.0 weight: the mask stays
        j = min(zero_weights)
        assert reranker._off(row, values[:j] + (arrays[j],) + values[j + 1:]) is row.off
        negative = Weights(**{name: -0.0 if j == k else 1.0 for k, name in enumerate(SIGNALS)})
        # (past the cache, which holds -0.0 and +0.0 weights as one: they compare equal)
        assert reranker._off(reranker._weight_row.__wrapped__(negative, None), values) is not None


def test_a_rerank_takes_the_new_kernels(monkeypatch):
    """relevance, recency, columns, best_first and take all run on a clean rerank."""
    from heaprank import Reranker, reranker
    from heaprank.scoring import signals as sig
    from tests.strategies import POOL

    taken: dict[str, list[bool]] = {}

    def watch(owner: Any, name: str) -> None:
        kernel = getattr(owner, name)

        def counted(*args: Any) -> Any:
            out = kernel(*args)
            taken.setdefault(name, []).append(out is not None)
            return out

        monkeypatch.setattr(owner, name, counted)

    for name in ("relevance_kernel", "halvings_kernel", "recency_kernel"):
        watch(sig, name)
    for name in ("columns_kernel", "best_first_kernel", "take_kernel"):
        watch(reranker, name)
    rr = Reranker()
    ranking = rr.rerank("when is my flight", POOL, namespace="ana", k=4, now=NOW)
    assert ranking[0].explain()
    assert set(taken) == {"relevance_kernel", "halvings_kernel", "recency_kernel",
                          "columns_kernel", "best_first_kernel", "take_kernel"}
    assert all(all(calls) for calls in taken.values())
