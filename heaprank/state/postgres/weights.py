"""The fitted-weights record in a PostgreSQL state (:mod:`heaprank.state.weights`): the
``meta`` row ``weights``, replaced only from the version a writer read."""

from __future__ import annotations

from typing import Any

from ..weights import record_version


def swap_record(conn: Any, lock: int, expected: int, record: str) -> bool:
    """Store ``record`` if the stored one is still at version ``expected`` (under the advisory
    lock ``lock``, in the caller's transaction): whether it was stored."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
    row = conn.execute("SELECT value FROM meta WHERE key = 'weights'").fetchone()
    if record_version(None if row is None else str(row[0])) != expected:
        return False
    conn.execute("INSERT INTO meta VALUES ('weights', %s) ON CONFLICT (key) DO UPDATE "
                 "SET value = excluded.value", (record,))
    return True
