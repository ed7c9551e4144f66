"""What a PostgreSQL failure means for heaprank: each psycopg error as the
:class:`~heaprank.errors.StateError` subclass that names its cause, so a rerank can degrade
(a lost connection, a server restarting) and a caller can tell a full disk from a refusal.

Messages name the server without its password and quote PostgreSQL's own words, never a
stored value."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from ...errors import (
    StateCorruptError,
    StateError,
    StateFullError,
    StateReadOnlyError,
    StateUnavailableError,
)

# SQLSTATE classes and codes (https://www.postgresql.org/docs/current/errcodes-appendix.html)
_CONNECTION = ("08", "57P")  # connection exceptions; operator intervention (shutdown, terminate)
_FULL = ("53100", "53200", "53300")  # disk full, out of memory, too many connections
_READ_ONLY = ("25006", "42501")  # read-only transaction, insufficient privilege
_CORRUPT = ("XX001", "XX002")  # data corrupted, index corrupted
#: Retried by a write transaction: the server rolled it back whole and asks for a retry.
RETRY_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock detected


def redacted(url: str) -> str:
    """``url`` without its password (for messages and ``repr``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def state_error(where: str, exc: BaseException) -> StateError:
    """The heaprank error of a psycopg (or pool) failure on the state ``where`` names."""
    import psycopg
    from psycopg_pool import PoolTimeout

    text = " ".join(str(exc).split())[:300]
    if isinstance(exc, PoolTimeout):
        return StateUnavailableError(f"{where}: no connection to the server ({text})")
    code = getattr(exc, "sqlstate", None) or ""
    if code.startswith(_CONNECTION) or (not code and isinstance(exc, psycopg.OperationalError)):
        return StateUnavailableError(f"{where}: the connection to the server was lost or "
                                     f"refused ({text}); the next call reconnects")
    if code in _FULL:
        return StateFullError(f"{where}: the server has no room ({text}); nothing of this write "
                              f"was applied")
    if code in _READ_ONLY:
        return StateReadOnlyError(f"{where}: the server refuses this write ({text})")
    if code in _CORRUPT:
        return StateCorruptError(f"{where}: the server reports damaged data ({text})")
    return StateError(f"{where}: {text}")


def is_connection_failure(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection (not the statement) failed."""
    return isinstance(state_error("", exc), StateUnavailableError)
