"""Opening the SQLite state's file: the checks before anything is written (the folder exists,
the file is heaprank's), WAL mode and secure deletes for a writer, the schema created or
migrated, and a snapshot for a reader on a read-only mount."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import weakref
from pathlib import Path

from ...errors import StateError
from .failures import state_error
from .schema import check_schema, read_meta

logger = logging.getLogger("heaprank")


def open_connection(path: str, *, read_only: bool, busy_timeout_s: float,
                    owner: object) -> sqlite3.Connection:
    """A connection to the state at ``path`` (``owner``: what a snapshot's folder lives as long
    as)."""
    if path != ":memory:":
        folder = Path(path).parent
        if not folder.is_dir():
            raise StateError(f"SQLite state {path!r}: folder {str(folder)!r} does not exist "
                             f"(heaprank does not create folders: a typo would silently start "
                             f"an empty state)")
        if read_only and not Path(path).exists():
            raise StateError(f"SQLite state {path!r}: no such file")
    try:
        if read_only:
            conn = _open_read_only(path, busy_timeout_s, owner)
        else:
            conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        try:
            read_meta(conn, path)  # refuse another application's file before changing anything
        except StateError:
            conn.close()
            raise
        if not read_only:
            if path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA secure_delete = ON")
        check_schema(conn, path, read_only)
    except sqlite3.DatabaseError as exc:
        raise state_error(path, exc) from None
    return conn


def _open_read_only(path: str, busy_timeout_s: float, owner: object) -> sqlite3.Connection:
    """A read-only connection. A write-ahead log whose shared-memory index (``-shm``) is
    missing and cannot be created (a read-only mount) makes SQLite refuse the file, and
    ``immutable`` would ignore the log's commits: the file and its log are then read from a
    private copy, a snapshot of the state as it stands, removed with ``owner``."""
    full = os.path.abspath(path)
    try:
        conn = sqlite3.connect(Path(full).as_uri() + "?mode=ro", uri=True, timeout=busy_timeout_s,
                               isolation_level=None, check_same_thread=False)
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        if not os.path.exists(full + "-wal") or os.path.exists(full + "-shm"):
            raise
    copy = tempfile.mkdtemp(prefix="heaprank-ro-")
    weakref.finalize(owner, shutil.rmtree, copy, True)
    for suffix in ("", "-wal"):
        shutil.copyfile(full + suffix, os.path.join(copy, "state.db" + suffix))
    logger.warning("heaprank: %s is on a read-only mount with a write-ahead log; reading a "
                   "snapshot of it", path)
    return sqlite3.connect(os.path.join(copy, "state.db"), timeout=busy_timeout_s,
                           isolation_level=None, check_same_thread=False)
