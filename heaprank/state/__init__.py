"""State backends, named by URL: ``memory://``, ``sqlite:///path`` (``sqlite:////abs``, ``~``),
``redis://host:port/db`` (``rediss://``, ``unix://``), ``redis+cluster://host:port`` and
``postgresql://user@host:port/dbname`` (``postgres://``).

SQLite URLs take options as a query string: ``?mode=ro`` (read only), ``synchronous=NORMAL``,
``busy_timeout=5`` (seconds), ``max_impressions=100000``, ``impression_ttl=86400`` (seconds),
``max_open_impressions=100000``. ``memory://`` takes ``max_impressions``, ``impression_ttl`` and
``max_open_impressions`` the same way.
Redis URLs take ``prefix``, ``global_shards``, ``timeout``, ``global_cache_ttl``,
``max_impressions``, ``impression_ttl``, ``replica_url``, ``read_from_replicas``,
``eviction``, ``max_connections`` and ``pool_timeout`` the same way (see
:class:`~heaprank.state.redis.RedisState` and docs/redis.md); other query options go to
redis-py. PostgreSQL URLs take ``schema`` (default ``heaprank``), ``mode=ro``, ``pool_size``,
``timeout``, ``max_impressions``, ``impression_ttl`` and ``max_open_impressions`` (see
:class:`~heaprank.state.postgres.PostgresState` and docs/postgres.md); other query options go
to libpq. A backend may also offer an async twin of its hot path
(:class:`AsyncStateBackend`, as ``RedisState.async_backend()`` does) for ``Reranker.arerank``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..errors import ConfigError
from ..model.evidence import DocStats, LinkCounts
from ..records import FeedbackOutcome, Impression, Update, new_recall_id
from .base import StateBackend
from .capabilities import AsyncStateBackend
from .memory import MemoryState
from .options import option_argument
from .sqlite.backend import SQLiteState

__all__ = ["AsyncStateBackend", "DocStats", "FeedbackOutcome", "Impression", "LinkCounts",
           "MemoryState", "SQLiteState", "StateBackend", "Update", "new_recall_id", "open_state",
           "check_url", "sqlite_path", "sqlite_options"]

_SQLITE_OPTIONS = {"mode": str, "synchronous": str, "busy_timeout": float,
                   "max_impressions": int, "impression_ttl": float, "max_open_impressions": int}
_MEMORY_OPTIONS = {"max_impressions": int, "impression_ttl": float, "max_open_impressions": int}
_OPTION_ARGS = {"busy_timeout": "busy_timeout_s", "impression_ttl": "impression_ttl_s"}


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:///relative.db`` or ``sqlite:////abs/path.db`` URL names."""
    path = url[len("sqlite://"):].split("?", 1)[0]
    if path.startswith("/"):
        path = path[1:]  # sqlite:///rel.db -> rel.db; sqlite:////abs.db -> /abs.db
    if not path:
        raise ConfigError(f"state: {url!r} names no file; use sqlite:///path/to/file.db")
    return path


def _url_options(url: str, known: dict[str, type]) -> dict[str, Any]:
    """The keyword options given in a URL's query string, of the ``known`` names and types."""
    out: dict[str, Any] = {}
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        kind = known.get(name)
        if kind is None:
            raise ConfigError(f"state: unknown option {name!r} in {url!r}; expected one of "
                              f"{', '.join(known)}")
        keyword, parsed = option_argument(name, value, kind, _OPTION_ARGS)
        out[keyword] = parsed
    return out


def sqlite_options(url: str) -> dict[str, Any]:
    """The keyword options of :class:`SQLiteState` given in a URL's query string."""
    return _url_options(url, _SQLITE_OPTIONS)


def memory_options(url: str) -> dict[str, Any]:
    """The keyword options of :class:`MemoryState` given in a ``memory://`` URL."""
    return _url_options(url, _MEMORY_OPTIONS)


def check_url(url: str) -> str:
    """``url`` if :func:`urllib.parse.urlsplit` reads it, else a ConfigError naming ``state``
    (with urlsplit's words, such as "Invalid IPv6 URL": never the URL, which may hold a
    password)."""
    try:
        urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"state: not a valid URL ({exc})") from None
    return url


def open_state(state: str | StateBackend | None, *, strict: bool = False) -> StateBackend:
    """A backend from a URL, an existing backend, or ``None`` (in memory). With ``strict`` a
    Redis server that cannot be reached raises StateUnavailableError here; without it the
    state opens anyway and its first call checks again (see ``RedisState``)."""
    if state is None:
        return MemoryState()
    if not isinstance(state, str):
        if isinstance(state, StateBackend):
            return state
        raise TypeError(f"state: expected a URL or a StateBackend, got {type(state).__name__}")
    scheme = state.split(":", 1)[0] if ":" in state else ""
    if scheme == "memory":
        try:
            return MemoryState(**memory_options(state))
        except ValueError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"state: {exc}") from None
    if scheme == "sqlite":
        try:
            return SQLiteState(sqlite_path(state), **sqlite_options(state))
        except ValueError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"state: {exc}") from None
    if scheme in ("redis", "rediss", "unix", "redis+cluster"):
        from .redis.backend import RedisState, redis_options

        check_url(state)
        try:
            url, options = redis_options(state)
            return RedisState(url, strict=strict, **options)
        except ValueError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"state: {exc}") from None
    if scheme in ("postgresql", "postgres"):
        from .postgres.backend import PostgresState
        from .postgres.url import postgres_options

        url, options = postgres_options(state)
        try:
            return PostgresState(url, **options) if strict else PostgresState.lazy(url, **options)
        except ValueError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"state: {exc}") from None
    hint = f" (for a SQLite file: 'sqlite:///{state}')" if not scheme and state.strip() else ""
    raise ConfigError(f"state: unknown backend URL {state!r}{hint}; expected memory://, "
                      f"sqlite:///path, redis://host:port/db, redis+cluster://host:port or "
                      f"postgresql://user@host:port/dbname")
