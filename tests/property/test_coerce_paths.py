"""The one validation path: the checked coercion and the two fast paths that are caches of it.

:func:`coerce_checked` is the specification of a valid candidate; the candidates stage's kernel
(:func:`coerce_c`) and the fast Python path (:func:`coerce_plain`) must each either return
exactly the batch the checked path builds (every field, NaN positions included) or return None
so the checked path decides (and raises its error). On any input. Without the kernel
(``HEAPRANK_PURE_PYTHON=1``, or not built) :func:`coerce_c` is always None and the public entry
point is the fast Python path, then the checked path.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank import _accel
from heaprank.errors import HeapRankError
from heaprank.scoring.candidates import (
    DEFAULT_FIELD_KEYS,
    CandidateBatch,
    coerce_c,
    coerce_candidates,
    coerce_checked,
    coerce_plain,
)
from tests.strategies import (
    _CLEAN_VALUES,
    EDGES,
    NOW,
    WILD_TARGETS,
    candidate_lists,
    clean_candidate,
    near_clean_candidate_lists,
    scores,
    texts,
    wild_candidate_lists,
    wild_values,
)

BATCH_FIELDS = CandidateBatch.__dataclass_fields__


def assert_same_batch(got: CandidateBatch, want: CandidateBatch) -> None:
    for name in BATCH_FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        if isinstance(b, np.ndarray):
            assert isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, name
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
        elif name == "items":
            assert len(a) == len(b) and all(x is y for x, y in zip(a, b)), name
        else:
            assert a == b, name
            assert [type(v) for v in a] == [type(v) for v in b], name


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return "batch", call()
    except Exception as exc:  # every error: the test then checks it is one heaprank means
        return "error", exc


#: Whether the kernel is in use: then it must take the clean input below
KERNEL = _accel.kernels("candidates") is not None


def check_paths_agree(items: list[Any], on_invalid: str) -> None:
    """The kernel's and the fast Python path's batches are the checked batch (or None), and the
    public entry point gives the checked path's batch or its very error."""
    kind, checked = outcome(lambda: coerce_checked(items, now=NOW, on_invalid=on_invalid))
    for fast in (coerce_c(items, now=NOW), coerce_plain(items, now=NOW)):
        if kind == "error":
            assert isinstance(checked, HeapRankError), repr(checked)
            assert isinstance(checked, (TypeError, ValueError)), repr(checked)
            assert fast is None
        elif fast is not None:
            assert_same_batch(fast, checked)
            assert all(flags == () for flags in checked.flags)
    kind2, public = outcome(lambda: coerce_candidates(items, now=NOW, on_invalid=on_invalid))
    assert kind2 == kind
    if kind == "error":
        assert type(public) is type(checked) and str(public) == str(checked)
    else:
        assert_same_batch(public, checked)


@given(items=wild_candidate_lists, on_invalid=st.sampled_from(["raise", "neutral"]))
def test_paths_agree_on_wild_input(items, on_invalid):
    check_paths_agree(items, on_invalid)


@pytest.mark.parametrize("target", WILD_TARGETS)
@given(data=st.data(), on_invalid=st.sampled_from(["raise", "neutral"]))
def test_paths_agree_on_one_wild_value_among_clean_ones(target, data, on_invalid):
    check_paths_agree(data.draw(near_clean_candidate_lists(target)), on_invalid)


@given(items=candidate_lists(scored=None), as_objects=st.booleans())
def test_the_fast_paths_take_clean_input(items, as_objects):
    """The fast Python path takes clean dicts and Candidate objects; the kernel the objects."""
    items = [clean_candidate(item, as_objects) for item in items]
    want = coerce_checked(items, now=NOW)
    assert_same_batch(coerce_plain(items, now=NOW), want)
    fast = coerce_c(items, now=NOW)
    assert (fast is not None) == (KERNEL and as_objects)
    if fast is not None:
        assert_same_batch(fast, want)


@given(items=candidate_lists(scored=None), as_objects=st.booleans(),
       tags=st.sampled_from([None, "travel", "", ["a", "b", ""], ("x",), []]),
       key=st.sampled_from(["plan", 7, "", None]), superseded=st.sampled_from([True, False]))
def test_the_fast_python_path_takes_tags_int_keys_and_flags(items, as_objects, tags, key,
                                                            superseded):
    for item in items:
        item["metadata"].update(tags=tags, key=key, thread=key, superseded=superseded)
    items = [clean_candidate(item, as_objects) for item in items]
    assert_same_batch(coerce_plain(items, now=NOW), coerce_checked(items, now=NOW))


def test_a_plain_dict_batch_is_built_without_the_checked_path(monkeypatch):
    """Clean dicts (the latency benchmark's shape: str id and text, a float score, a small
    metadata) never reach the checked path."""
    from heaprank.scoring import candidates

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the checked path ran")

    monkeypatch.setattr(candidates, "coerce_checked", refuse)
    items = [{"id": f"m{i}", "text": f"memory {i}", "score": 1 / (i + 1),
              "metadata": {"created_at": NOW - 60 * i, "kind": "fact", "source": "maya"}}
             for i in range(50)]
    batch = coerce_candidates(items, now=NOW)
    assert batch.ids[:2] == ("m0", "m1") and batch.kinds == ("fact",) * 50
    assert batch.created_at[1] == NOW - 60 and batch.absent("tags")


@st.composite
def uniform_candidate_lists(draw: st.DrawFn, target: str) -> list[Any]:
    """Valid candidates whose metadata all have one key set (the retriever's usual output,
    which the fast path reads by the first metadata's keys), some fields under two of their
    aliases, maybe keys of no shape field, with one wild value put in at ``target`` under a key
    every metadata has (so the key set stays uniform) or under a new one (so it does not, maybe
    at the same size: one key swapped for another)."""
    n = draw(st.integers(min_value=1, max_value=8))
    names = draw(st.lists(st.sampled_from(sorted(DEFAULT_FIELD_KEYS)), max_size=6, unique=True))
    keys = [key for name in names
            for key in draw(st.lists(st.sampled_from(DEFAULT_FIELD_KEYS[name]), min_size=1,
                                     max_size=2, unique=True))]
    keys += draw(st.lists(st.sampled_from(["note", "url"]), max_size=2, unique=True))
    name_of = {key: name for name, aliases in DEFAULT_FIELD_KEYS.items() for key in aliases}
    values = {**_CLEAN_VALUES, None: st.text(max_size=3)}  # None: a key of no shape field
    scored = draw(st.booleans())
    items: list[dict[str, Any]] = []
    for i in range(n):
        meta = {key: draw(st.one_of(st.none(), values[name_of.get(key)])
                          if draw(st.integers(0, 4)) == 0 else values[name_of.get(key)])
                for key in keys}
        item: dict[str, Any] = {"id": f"d{i}", "text": draw(texts), "metadata": meta}
        if scored:
            item["score"] = draw(scores)
        items.append(item)
    if draw(st.booleans()):
        value = draw(st.sampled_from(EDGES[target]) if draw(st.integers(0, 3)) else wild_values)
        item = items[draw(st.integers(0, n - 1))]
        if target in ("id", "text", "score"):
            item[target] = value
        else:
            shared = [key for key in keys if name_of.get(key) == target]
            where = (draw(st.sampled_from(shared)) if shared and draw(st.booleans())
                     else draw(st.sampled_from(DEFAULT_FIELD_KEYS[target])))
            meta = item["metadata"]
            if where not in meta and meta and draw(st.booleans()):
                del meta[draw(st.sampled_from(sorted(meta)))]  # a key set of the same size
            meta[where] = value
    as_objects = draw(st.booleans())
    return [clean_candidate(item, as_objects) for item in items]


@pytest.mark.parametrize("target", [t for t in WILD_TARGETS if t != "metadata"])
@given(data=st.data(), on_invalid=st.sampled_from(["raise", "neutral"]))
def test_paths_agree_on_uniform_metadata_with_one_wild_value(target, data, on_invalid):
    check_paths_agree(data.draw(uniform_candidate_lists(target)), on_invalid)


@given(items=uniform_candidate_lists("kind"))
def test_the_kernel_takes_clean_uniform_input(items):
    clean = coerce_checked(items, now=NOW, on_invalid="neutral")
    # no wild value, or a valid one (but a set of tags, which the kernel leaves to Python)
    if all(flags == () for flags in clean.flags) and not any(
            isinstance(_metadata(item).get("tags"), (set, frozenset)) for item in items):
        want = coerce_checked(items, now=NOW)
        assert_same_batch(coerce_plain(items, now=NOW), want)
        fast = coerce_c(items, now=NOW)
        if fast is not None:
            assert_same_batch(fast, want)


def _metadata(item: Any) -> dict[Any, Any]:
    meta = item["metadata"] if isinstance(item, dict) else item.metadata
    return meta or {}


#: Strings of every width Python stores (ASCII, Latin-1, two-byte, four-byte) and both halves of
#: a lone surrogate, so a column may mix ASCII with non-ASCII and hide an unencodable string.
_WIDE_STRINGS = st.text(alphabet=st.sampled_from(["a", "b", " ", "á", "Ж", "会", "😀", "\ud800",
                                                  "\udfff"]), min_size=1, max_size=5)
_STRING_COLUMNS = ("id", "text", "kind", "source", "key", "thread", "tags")


@pytest.mark.parametrize("target", _STRING_COLUMNS)
@given(data=st.data(), as_objects=st.booleans())
def test_the_kernel_takes_every_encodable_string_column_and_defers_at_a_lone_surrogate(
        target, data, as_objects):
    n = data.draw(st.integers(min_value=1, max_value=8))
    values = data.draw(st.lists(_WIDE_STRINGS, min_size=n, max_size=n, unique=True))
    items = []
    for i, value in enumerate(values):
        item: dict[str, Any] = {"id": f"d{i}", "text": "some text", "score": i / 8,
                                "metadata": {"kind": "fact", "created_at": NOW - i}}
        if target in ("id", "text"):
            item[target] = value
        else:
            item["metadata"][target] = value
        items.append(clean_candidate(item, as_objects))
    check_paths_agree(items, "raise")
    encodable = not any("\ud800" <= char <= "\udfff" for value in values for char in value)
    blank = target in ("id", "text") and any(not value.strip() for value in values)
    taken = encodable and not blank
    assert (coerce_plain(items, now=NOW) is not None) == taken
    kernel_taken = KERNEL and as_objects and taken and target != "tags"
    assert (coerce_c(items, now=NOW) is not None) == kernel_taken


@pytest.mark.parametrize("values", [
    [10**400, -(10**400)],  # a finite sum of ints beyond the float range
    [1e308, 1e308],  # valid floats whose sum overflows: the kernel may defer, never differ
    [math.inf, -math.inf],
    [1.0, None],
    [None, 2],
    [None, None],
    [0.5, -0.0, 3],
])
def test_scores_at_the_edges_give_the_checked_paths_batch_or_error(values):
    items = [{"id": f"d{i}", "text": "t", "score": value, "metadata": {}}
             for i, value in enumerate(values)]
    check_paths_agree(items, "raise")
    check_paths_agree(items, "neutral")


def test_the_kernel_defers_on_no_candidates():
    assert coerce_c([], now=NOW) is None
