"""Namespace and query checks: every entry point applies the same rule."""

from __future__ import annotations

import pytest

from heaprank._checks import (
    MAX_NAMESPACE_CHARS,
    check_encodable,
    check_ids,
    check_namespace,
    check_query,
    preview,
)
from heaprank.errors import InputError, InputTypeError


@pytest.mark.parametrize("value", ["alice", "tenant-42/prod", "Zoë", "Москва", "a" * MAX_NAMESPACE_CHARS,
                                   " padded "])
def test_valid_namespaces_are_returned_unchanged(value):
    assert check_namespace(value) is value


@pytest.mark.parametrize("value, exc, match", [
    (None, InputTypeError, r"^namespace: expected str, got NoneType$"),
    (42, InputTypeError, r"^namespace: expected str, got int$"),
    (b"alice", InputTypeError, r"^namespace: expected str, got bytes$"),
    ("", InputError, r"^namespace: empty"),
    ("   ", InputError, r"^namespace: whitespace only$"),
    ("\u3000", InputError, r"^namespace: whitespace only$"),
    ("*", InputError, r"^namespace: '\*' is reserved"),
    ("a" * (MAX_NAMESPACE_CHARS + 1), InputError, r"^namespace: 257 characters, at most 256 allowed$"),
    ("x" * 10_000, InputError, r"^namespace: 10000 characters"),
    ("al\ud800ice", InputError, r"^namespace: contains a lone surrogate at index 2"),
    ("alice\x00", InputError, r"^namespace: control character '\\x00' at index 5$"),
    ("ali\nce", InputError, r"^namespace: control character '\\n' at index 3$"),
    ("bob\x7f", InputError, r"^namespace: control character"),
    ("bob\x85", InputError, r"^namespace: control character"),
])
def test_bad_namespaces_name_the_field(value, exc, match):
    with pytest.raises(exc, match=match):
        check_namespace(value)


@pytest.mark.parametrize("value", ["", "When is my flight?", " ", "line\nbreak", "会议"])
def test_any_encodable_query_is_valid(value):
    assert check_query(value) is value


@pytest.mark.parametrize("value, exc, match", [
    (None, InputTypeError, r"^query: expected str, got NoneType$"),
    (["q"], InputTypeError, r"^query: expected str, got list$"),
    ("caf\udce9", InputError, r"^query: contains a lone surrogate at index 3"),
])
def test_bad_queries_name_the_field(value, exc, match):
    with pytest.raises(exc, match=match):
        check_query(value)


def test_check_encodable_names_the_field_it_was_given():
    assert check_encodable("ok", "f") == "ok"
    with pytest.raises(InputError, match=r"^candidates\[2\]\.source: contains a lone surrogate"):
        check_encodable("\udfff", "candidates[2].source")


def test_preview_shortens_long_values():
    assert preview("abc") == "'abc'"
    long = preview("x" * 10_000)
    assert len(long) < 80 and long.endswith("(10000 chars)")


@pytest.mark.parametrize("value, exc, match", [
    (None, InputTypeError, r"^used: expected a list of ids, got NoneType$"),
    ("doc-1", InputTypeError, r"^used: expected a list of ids, got str$"),
    ({"doc-1"}, InputTypeError, r"^used: expected a list of ids, got set$"),
    (["a", 3], InputTypeError, r"^used\[1\]: expected str, got int$"),
    (["a", ""], InputError, r"^used\[1\]: empty$"),
    ([" "], InputError, r"^used\[0\]: whitespace only$"),
    (["ok", "x\ud800"], InputError, r"^used\[1\]: contains a lone surrogate at index 1"),
])
def test_bad_id_lists_name_the_field_and_index(value, exc, match):
    with pytest.raises(exc, match=match):
        check_ids(value, "used")


@pytest.mark.parametrize("value", [[], ["a", "b"], ("a",), ["Zoë", "doc 1"]])
def test_id_lists_come_back_as_tuples(value):
    assert check_ids(value, "shown") == tuple(value)
