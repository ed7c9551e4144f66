"""What an SQLite failure means for heaprank: each ``sqlite3`` error as the
:class:`~heaprank.errors.StateError` subclass that names its cause, so a rerank can degrade and
a caller can tell a full disk from a read-only file from a corrupt value."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from ...errors import (
    StateCorruptError,
    StateError,
    StateFullError,
    StateReadOnlyError,
    StateUnavailableError,
)

# SQLite's primary result codes (https://sqlite.org/rescode.html), for the errors that name one
_BUSY, _READONLY, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 8, 11, 13, 14, 26
#: A failure's words in SQLite's message, for a Python whose sqlite3 errors carry no code
_MESSAGES = (("disk is full", _FULL), ("readonly database", _READONLY), ("locked", _BUSY),
             ("malformed", _CORRUPT), ("not a database", _NOTADB),
             ("unable to open", _CANTOPEN))


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if isinstance(code, int):
        return code & 0xFF  # the primary code of an extended one
    text = str(exc)
    return next((c for words, c in _MESSAGES if words in text), None)


def state_error(path: str, exc: sqlite3.Error) -> StateError:
    """The heaprank error of an SQLite failure on the state at ``path``."""
    code = _code(exc)
    where = f"SQLite state {path!r}"
    if code == _FULL:
        return StateFullError(f"{where}: the disk is full ({exc}); nothing of this write was "
                              f"applied")
    if code == _READONLY:
        return StateReadOnlyError(f"{where}: the file refuses writes ({exc})")
    if code in (_CORRUPT, _NOTADB):
        return StateCorruptError(f"{where}: the file is damaged ({exc})")
    if code in (_BUSY, _CANTOPEN):
        return StateUnavailableError(f"{where}: {exc}")
    return StateError(f"{where}: {exc}")


def not_a_number(where: str, value: object = None) -> StateCorruptError:
    """The error of a stored value that is not a number, naming ``where`` (``table.column``):
    SQLite keeps whatever was written, so a damaged or hand-edited file can hold text where a
    count belongs."""
    shown = "" if value is None else f" ({type(value).__name__} {str(value)[:40]!r})"
    return StateCorruptError(f"SQLite state: {where} holds a value that is not a number{shown}; "
                             f"the file was damaged or edited by hand")


def numbers(where: str, values: Iterable[Any]) -> None:
    """Raise :func:`not_a_number` for the first of ``values`` that is not an int or a float."""
    for value in values:
        if type(value) is not float and type(value) is not int:
            raise not_a_number(where, value)
