"""Where the fitted signal weights live: in the state, so that every reranker sharing it ranks
with the same ones (``Config.refit.every``; docs/design.md, "Continuous re-fitting").

A state keeps one record, JSON text with a ``version`` that every write raises by one. A write
is a compare-and-set on that version: of two processes that fitted at once, one stores its
fit and the other reads and adopts it. Readers compare the version they hold with the stored
one every ``Config.refit.poll_s`` seconds.

- memory: an attribute of the state (:meth:`MemoryState.read_weights`);
- SQLite: the ``meta`` row ``weights``, written in its own short transaction;
- Redis: the string key ``<prefix>:weights``, swapped by a small Lua script.

A state of another kind (a backend of your own, a read-only view) has no store: its rerankers
keep the weights of their config.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Protocol, runtime_checkable

from .base import StateBackend

__all__ = ["WeightStore", "record_version", "weight_store"]


@runtime_checkable
class WeightStore(Protocol):
    """A state's fitted-weights record: read it, or swap it on its version."""

    def read_weights(self) -> str | None: ...

    def swap_weights(self, expected: int, version: int, record: str) -> bool: ...


def record_version(record: str | None) -> int:
    """The version of a stored record (0: none, or one that cannot be read)."""
    if not record:
        return 0
    try:
        value = json.loads(record).get("version", 0)
    except (ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) else 0


class _SQLiteWeights:
    """The record as the ``meta`` row ``weights`` of a SQLite state."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def read_weights(self) -> str | None:
        with self.state._read_alone() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'weights'").fetchone()
        return None if row is None else str(row[0])

    def swap_weights(self, expected: int, version: int, record: str) -> bool:
        with self.state._write() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'weights'").fetchone()
            if record_version(None if row is None else str(row[0])) != expected:
                return False
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('weights', ?)", (record,))
        return True


#: KEYS: the record. ARGV: the expected version, the new record. Returns 1 if it was stored.
_SWAP = """
local cur = redis.call('GET', KEYS[1])
local v = 0
if cur then
  local ok, rec = pcall(cjson.decode, cur)
  if ok and type(rec) == 'table' and type(rec.version) == 'number' then v = rec.version end
end
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""


class _RedisWeights:
    """The record as the string key ``<prefix>:weights`` of a Redis state."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.key = f"{state.layout.prefix}:weights"

    def read_weights(self) -> str | None:
        value = self.state._call("read weights", lambda: self.state.client.get(self.key),
                                 idempotent=True)
        return None if value is None else bytes(value).decode("utf-8")

    def swap_weights(self, expected: int, version: int, record: str) -> bool:
        # A retry after a lost reply finds its own record stored and answers 0: the caller
        # then reads the record back, which is the one it wrote.
        done = self.state._call("write weights", lambda: self.state.client.eval(
            _SWAP, 1, self.key, str(expected), record), idempotent=True)
        return bool(done)


def weight_store(state: StateBackend) -> WeightStore | None:
    """The fitted-weights record of ``state``, or None for a state that keeps none. (A
    backend's module is looked up, not imported: a state of it exists only once it is.)"""
    if isinstance(state, WeightStore):
        return state
    sqlite_backend = sys.modules.get("heaprank.state.sqlite.backend")
    if sqlite_backend is not None and isinstance(state, sqlite_backend.SQLiteState):
        return _SQLiteWeights(state)
    redis_backend = sys.modules.get("heaprank.state.redis.backend")
    if redis_backend is not None and isinstance(state, redis_backend.RedisState):
        return _RedisWeights(state)
    return None
