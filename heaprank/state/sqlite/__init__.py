"""The embedded default: one SQLite file, WAL mode, safe with several processes on one host."""

from .backend import SQLiteState

__all__ = ["SQLiteState"]
