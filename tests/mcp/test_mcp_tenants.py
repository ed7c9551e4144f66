"""The tokens file and the namespaces each caller may name."""

from __future__ import annotations

import json

import pytest

from heaprank import InputError
from heaprank.mcp.tenants import Caller, TokenTable

MAYA = "maya-0123456789abcdef"


def _table(tmp_path, data) -> TokenTable:
    path = tmp_path / "tokens.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return TokenTable.load(path, "default")


def test_a_token_names_its_namespaces_and_its_first_is_its_default(tmp_path):
    table = _table(tmp_path, {MAYA: ["user:maya", "user:maya:work"], "x" * 16: ["*"]})
    maya = table.caller(MAYA)
    assert maya is not None and not maya.operator
    assert maya.scope(None) == "user:maya" and maya.scope("user:maya:work") == "user:maya:work"
    with pytest.raises(InputError, match="not one of the namespaces this token may name"):
        maya.scope("user:bob")
    operator = table.caller("x" * 16)
    assert operator is not None and operator.operator and operator.scope(None) == "default"
    assert operator.scope("anyone") == "anyone"
    assert table.caller(MAYA + " ") is None and table.caller("") is None


def test_the_owner_may_name_any_namespace():
    owner = Caller("user:maya")
    assert owner.operator and owner.scope(None) == "user:maya" and owner.scope("b") == "b"


@pytest.mark.parametrize(("data", "message"), [
    ("{not json", "is not a JSON file"),
    ([MAYA], "must hold a JSON object"),
    ({}, "with at least one token"),
    ({"short": ["a"]}, "at least 16 characters"),
    ({f" {MAYA}": ["a"]}, "without surrounding spaces"),
    ({MAYA: []}, "expected a non-empty list of namespaces"),
    ({MAYA: "user:maya"}, "expected a non-empty list of namespaces"),
    ({MAYA: ["user:maya", "bad\nname"]}, "namespace: control character"),
    ({MAYA: [7]}, "namespace: expected str"),
])
def test_a_bad_tokens_file_is_an_error_that_never_shows_a_token(tmp_path, data, message):
    with pytest.raises(InputError, match=message) as caught:
        _table(tmp_path, data)
    assert MAYA not in str(caught.value)


def test_a_missing_tokens_file_is_named(tmp_path):
    with pytest.raises(InputError, match="--tokens: cannot read"):
        TokenTable.load(tmp_path / "nope.json", "default")
