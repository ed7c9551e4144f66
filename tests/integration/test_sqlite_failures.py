"""The SQLite state on a full disk, a read-only mount and with corrupt values: every failure is a
StateError naming its cause, a rerank still answers (untracked, flagged), and nothing is damaged.

The disk cases mount a small tmpfs of their own (they need root, as CI has; elsewhere they skip
and say why)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from heaprank import (
    Reranker,
    SQLiteState,
    StateCorruptError,
    StateFullError,
)

NOW = 1_750_000_000.0
CANDS = [{"id": f"d{i}", "text": f"note {i} about the Lisbon flight", "score": 1.0 + i}
         for i in range(8)]


@pytest.fixture()
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB tmpfs of this test's own, unmounted after it."""
    mount = tmp_path / f"mnt-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """A file that takes every free byte of ``folder``'s file system."""
    filler = folder / "filler"
    out = open(filler, "wb", buffering=0)  # noqa: SIM115  (closed below, the disk full)
    try:
        while True:
            out.write(b"\0" * 4096)
    except OSError:
        pass
    finally:
        try:
            out.close()
        except OSError:
            pass
    return filler


def test_a_full_disk_ranks_untracked_and_recovers_once_space_is_freed(tmpfs: Path) -> None:
    path = tmpfs / "state.db"
    rr = Reranker(f"sqlite:///{path}")
    taught = rr.rerank("when is my flight?", CANDS, namespace="maya", k=3, now=NOW)
    rr.feedback(taught.recall_id, used=[taught.ids[0]], now=NOW)
    pending = [rr.rerank("when is my flight?", CANDS, namespace="maya", k=3, now=NOW)
               for _ in range(50)]
    filler = _fill(tmpfs)
    outcomes = []
    for i in range(50):  # the first writes may still fit in a page the file had free
        ranking = rr.rerank("when is my flight?", CANDS, namespace="maya", k=3, now=NOW + i)
        outcomes.append(ranking[0].flags)
    full = [flags for flags in outcomes if "state full: not tracked" in flags]
    assert full, outcomes  # answered every time, and said it could not record
    with pytest.raises(StateFullError, match="disk is full"):
        for ranking in pending:  # raises, having applied nothing, once no page is left
            rr.feedback(ranking.recall_id, used=[ranking.ids[1]], now=NOW)
    filler.unlink()
    again = rr.rerank("when is my flight?", CANDS, namespace="maya", k=3, now=NOW)
    assert not again[0].flags
    rr.feedback(again.recall_id, used=[again.ids[0]], now=NOW)
    assert rr.state.integrity_check() == "ok"  # type: ignore[attr-defined]
    applied = rr.stats()["feedbacks"]
    assert applied >= 2
    assert rr.links("maya")  # the learned links are readable and whole
    rr.close()


def test_a_read_only_mount_with_a_write_ahead_log_is_read(tmpfs: Path) -> None:
    path = tmpfs / "state.db"
    writer = Reranker(SQLiteState(path))
    ranking = writer.rerank("when is my flight?", CANDS, namespace="maya", k=3, now=NOW)
    writer.feedback(ranking.recall_id, used=[ranking.ids[0]], now=NOW)
    learned = writer.links("maya")
    # The log as a crash (or another host's writer) leaves it: a -wal file, no -shm index
    copy = tmpfs / "copy"
    copy.mkdir()
    for suffix in ("", "-wal"):
        (copy / f"state.db{suffix}").write_bytes(Path(f"{path}{suffix}").read_bytes())
    writer.close()
    assert (copy / "state.db-wal").stat().st_size > 0
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    reader = Reranker(f"sqlite:///{copy / 'state.db'}?mode=ro")
    assert reader.links("maya") == learned
    assert reader.stats()["feedbacks"] == 1
    reader.close()


def _corrupt(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_a_count_that_is_not_a_number_is_a_corrupt_state_naming_where(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    rr = Reranker(SQLiteState(path))
    ranking = rr.rerank("when is my flight?", CANDS, namespace="maya", k=3, now=NOW)
    rr.feedback(ranking.recall_id, used=[ranking.ids[0]], now=NOW)
    rr.close()
    _corrupt(path, "UPDATE links SET pos = 'many' WHERE fid = (SELECT MIN(fid) FROM links)")
    rr = Reranker(SQLiteState(path))
    again = rr.rerank("when is my flight?", CANDS, namespace="maya", k=3, now=NOW)
    assert again[0].flags == ("state corrupt: priors only, not tracked",)
    with pytest.raises(StateCorruptError, match="links.pos"):
        Reranker(SQLiteState(path), strict=True).rerank("when is my flight?", CANDS,
                                                        namespace="maya", k=3, now=NOW)
    with pytest.raises(StateCorruptError, match="links.pos/neg holds a value that is not a number"):
        rr.links("maya")  # the audit names it too, not numpy's ValueError
    rr.close()


def test_a_corrupt_feedback_count_is_named_as_itself(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SQLiteState(path).close()
    _corrupt(path, "UPDATE meta SET value = 'lots' WHERE key = 'feedbacks'")
    with pytest.raises(StateCorruptError, match="meta.feedbacks holds 'lots'"):
        SQLiteState(path)


def test_a_foreign_meta_table_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    _corrupt(path, "CREATE TABLE meta (k TEXT, v TEXT)")
    before = path.read_bytes()
    with pytest.raises(Exception, match="another application") as caught:
        SQLiteState(path)
    assert "no such column" not in str(caught.value)
    assert path.read_bytes() == before
    assert not os.path.exists(f"{path}-wal") or os.path.getsize(f"{path}-wal") == 0
