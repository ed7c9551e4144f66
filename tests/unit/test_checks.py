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


@pytest.mark.parametrize("value, index, category", [
    ("a\u200b", 1, "Cf"),          # zero-width space
    ("\u200dab", 0, "Cf"),         # zero-width joiner
    ("ab\u2060c", 2, "Cf"),        # word joiner
    ("ten\ufeffant", 3, "Cf"),     # byte order mark
    ("abc\u202e", 3, "Cf"),        # right-to-left override
    ("Zoë\u00ad", 3, "Cf"),        # soft hyphen
    ("a\u2028b", 1, "Zl"),         # line separator
    ("a\u2029b", 1, "Zp"),         # paragraph separator
    ("x\ue000", 1, "Co"),          # private use
    ("x\U000f0000", 1, "Co"),      # supplementary private use
    ("x\u0378", 1, "Cn"),          # unassigned
    ("Москва\U000e0001", 6, "Cf"), # language tag
])
def test_namespaces_with_invisible_or_unassigned_characters_are_rejected(value, index, category):
    """A namespace that looks like another (an invisible character in it) is refused, naming
    the field, the character's index and its Unicode category."""
    with pytest.raises(InputError, match=rf"^namespace: .*\(U\+[0-9A-F]{{4,6}}, category "
                                         rf"{category}\) at index {index}$"):
        check_namespace(value)
