"""State backends, named by URL: ``memory://``, ``sqlite:///path`` (``sqlite:////abs``)."""

from __future__ import annotations

from urllib.parse import urlparse

from ..errors import ConfigError
from .base import (
    DocStats,
    FeedbackBatch,
    FeedbackItem,
    FeedbackOutcome,
    Impression,
    LinkCounts,
    StateBackend,
)
from .memory import MemoryState
from .sqlite import SQLiteState

__all__ = ["DocStats", "FeedbackBatch", "FeedbackItem", "FeedbackOutcome", "Impression",
           "LinkCounts", "MemoryState", "SQLiteState", "StateBackend", "open_state", "sqlite_path"]


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:///relative.db`` or ``sqlite:////abs/path.db`` URL names."""
    path = url[len("sqlite://"):]
    if path.startswith("/"):
        path = path[1:]  # sqlite:///rel.db -> rel.db; sqlite:////abs.db -> /abs.db
    if not path:
        raise ConfigError(f"state: {url!r} names no file; use sqlite:///path/to/file.db")
    return path


def open_state(state: str | StateBackend | None) -> StateBackend:
    """A backend from a URL, an existing backend, or ``None`` (in memory)."""
    if state is None:
        return MemoryState()
    if not isinstance(state, str):
        if isinstance(state, StateBackend):
            return state
        raise TypeError(f"state: expected a URL or a StateBackend, got {type(state).__name__}")
    url = urlparse(state)
    if url.scheme == "memory":
        return MemoryState()
    if url.scheme == "sqlite":
        return SQLiteState(sqlite_path(state))
    if url.scheme in ("redis", "rediss", "unix"):
        raise ConfigError(f"state: the Redis backend is not available in this version ({state!r})")
    raise ConfigError(f"state: unknown backend URL {state!r}; expected memory://, "
                      f"sqlite:///path or redis://host:port/db")
