"""Small validators shared by the public entry points: namespaces, queries, encodable text.

Each returns the value it checked (so callers write ``ns = check_namespace(ns)``) and raises an
:class:`~heaprank.errors.InputTypeError` for a wrong type or an
:class:`~heaprank.errors.InputError` for a bad value, the message naming the field.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

from .errors import InputError, InputTypeError

#: Longest namespace accepted, in characters. Namespaces are keys in every backend (and in
#: Redis key names), so they are short identifiers, not payloads.
MAX_NAMESPACE_CHARS = 256

#: Longest query accepted, in characters: featurising a query costs time in proportion to its
#: length (about 0.75 s of CPU per MB), and a question is a sentence or a paragraph, not a
#: document (candidate texts are read up to 2,000 characters).
MAX_QUERY_CHARS = 8_000

#: Longest label value accepted (a candidate's ``kind``, ``source`` and each tag), in
#: characters: a label becomes part of stored feature names (``source:<value>`` and its
#: question-type crossings), so it is a short category, not a payload.
MAX_LABEL_CHARS = 512

#: Most results one rerank may return: an impression stores its shown items' count in 16 bits.
MAX_K = 65_535

#: C0 and C1 control characters (including NUL, newline, tab and DEL): invisible in logs and CLI
#: output, so a namespace holding one could pass for another.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

#: Unicode categories a namespace may not hold besides those: other control (Cc), format
#: (Cf: zero-width spaces and joiners, direction overrides, the byte order mark, tags),
#: surrogate (Cs), private use (Co), unassigned (Cn), line and paragraph separators (Zl, Zp).
#: Each is invisible or unreliable in a log or a terminal, so ``"a\u200b"`` could pass for
#: ``"a"``.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

_PREVIEW_CHARS = 60


def preview(value: object) -> str:
    """``repr(value)``, shortened so an error message never carries a whole caller payload."""
    text = repr(value)
    if len(text) <= _PREVIEW_CHARS:
        return text
    return f"{text[:_PREVIEW_CHARS - 3]}... ({len(value) if isinstance(value, str) else '?'} chars)"


def check_encodable(value: str, field: str) -> str:
    """``value`` if it encodes as UTF-8, else :class:`InputError` naming ``field``.

    A lone surrogate (``"\\ud800"``, from a bad decode upstream) is a valid Python ``str`` but
    no backend can store it: SQLite and Redis would raise mid-write. Rejecting it here makes
    every backend behave the same.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{field}: contains a lone surrogate at index {exc.start} "
                         f"(not encodable as UTF-8)") from None
    return value


def check_id(value: object, field: str) -> str:
    """A document id: a non-blank ``str`` that encodes as UTF-8.

    Raises:
        InputTypeError: not a ``str``.
        InputError: empty, whitespace only, or a lone surrogate.
    """
    if not isinstance(value, str):
        raise InputTypeError(f"{field}: expected str, got {type(value).__name__}")
    if type(value) is not str:
        # A str subclass may override __eq__ and __hash__ (so that an id fails to match
        # itself, or runs code mid-feedback): its plain string value is what is stored.
        value = str.__str__(value)
    if not value:
        raise InputError(f"{field}: empty")
    if value.isspace():
        raise InputError(f"{field}: whitespace only")
    return check_encodable(value, field)


def check_ids(value: object, field: str) -> tuple[str, ...]:
    """A list or tuple of ids (``shown``, ``used``), each checked by :func:`check_id`.

    Raises:
        InputTypeError: not a list or tuple (``None`` and a bare ``str`` included), or an id
            that is not a ``str`` (the message gives its index).
        InputError: an empty, blank or unencodable id.
    """
    if not isinstance(value, (list, tuple)):
        raise InputTypeError(f"{field}: expected a list of ids, got {type(value).__name__}")
    # The usual ids pass check_id as they are: ASCII (so encodable), neither empty nor blank.
    # Checked without building each id's field name (a loop, not a generator: a feedback
    # names one or two ids, and a generator costs more to start than they take to check);
    # any other id takes check_id's way.
    for item in value:
        if type(item) is not str or not item.isascii() or not item or item.isspace():
            return tuple(check_id(item, f"{field}[{j}]") for j, item in enumerate(value))
    return tuple(value)


def check_namespace(value: object) -> str:
    """A namespace: a non-blank string of at most :data:`MAX_NAMESPACE_CHARS` characters.

    Raises:
        InputTypeError: not a ``str``.
        InputError: empty, whitespace only, ``"*"`` (reserved for "every namespace"), too long,
            a lone surrogate, a control character, or any character of the categories of
            :data:`_INVISIBLE` (a zero-width space, a private-use or unassigned code point...).
    """
    if not isinstance(value, str):
        raise InputTypeError(f"namespace: expected str, got {type(value).__name__}")
    if not value:
        raise InputError("namespace: empty; pass a non-empty string")
    if value.isspace():
        raise InputError("namespace: whitespace only")
    if value == "*":
        raise InputError("namespace: '*' is reserved (it means every namespace)")
    if len(value) > MAX_NAMESPACE_CHARS:
        raise InputError(f"namespace: {len(value)} characters, at most {MAX_NAMESPACE_CHARS} "
                         f"allowed")
    check_encodable(value, "namespace")
    control = _CONTROL.search(value)
    if control is not None:
        raise InputError(f"namespace: control character {control.group()!r} at index "
                         f"{control.start()}")
    if not value.isascii():  # (ASCII holds no such character but the controls checked above)
        for at, char in enumerate(value):
            category = unicodedata.category(char)
            if category in _INVISIBLE:
                raise InputError(f"namespace: invisible or unassigned character {char!r} "
                                 f"(U+{ord(char):04X}, category {category}) at index {at}")
    return value


def check_query(value: object) -> str:
    """A query: any ``str`` of at most :data:`MAX_QUERY_CHARS` characters that encodes as UTF-8
    (the empty query is valid: no question type).

    Raises:
        InputTypeError: not a ``str``.
        InputError: too long, or a lone surrogate.
    """
    if not isinstance(value, str):
        raise InputTypeError(f"query: expected str, got {type(value).__name__}")
    if type(value) is not str:
        value = str.__str__(value)  # as for ids: its plain string value
    if len(value) > MAX_QUERY_CHARS:
        raise InputError(f"query: {len(value)} characters, at most {MAX_QUERY_CHARS} allowed")
    return check_encodable(value, "query")


def check_k(k: object) -> int:
    """The number of results to return: an int from 1 to :data:`MAX_K`.

    Raises:
        InputTypeError: not an int (``bool`` included).
        InputError: below 1 or above :data:`MAX_K`.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise InputTypeError(f"k: expected int, got {type(k).__name__}")
    if not 1 <= k <= MAX_K:
        raise InputError(f"k: must be from 1 to {MAX_K}, got {k}")
    return int(k)
