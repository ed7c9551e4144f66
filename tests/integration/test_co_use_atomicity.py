"""Co-use edges are part of the feedback's one transaction on SQLite: a failure or a kill -9 in
the middle of writing the edges leaves neither links nor edges, and the retry applies both
once."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from heaprank import Config, CoUse, Learning, Reranker, SQLiteState
from heaprank.state.sqlite import backend as sqlite_backend

NOW = 1_750_000_000.0
CONFIG = Config(learning=Learning(co_use=CoUse()))
CANDIDATES = [{"id": f"d{i}", "text": f"Note {i} from Monday", "score": float(5 - i)}
              for i in range(5)]


def _snapshot(state: SQLiteState) -> tuple:
    features, pos, neg = state.list_links("ns")
    return (features, pos.tolist(), neg.tolist(), state.list_edges("ns"), state.stats(),
            state.read_docs("ns", ["d0", "d1"]).use_count.tolist())


def _shown(path: Path) -> str:
    with Reranker(SQLiteState(path), config=CONFIG) as rr:
        return rr.rerank("When?", CANDIDATES, namespace="ns", k=5, now=NOW).recall_id


def _retry_applies_once(path: Path, recall_id: str) -> None:
    with Reranker(SQLiteState(path), config=CONFIG) as rr:
        assert rr.state.integrity_check() == "ok"
        assert rr.state.get_impression(recall_id).resolved == {}
        assert rr.feedback(recall_id, used=["d0", "d1"]).applied
        assert not rr.feedback(recall_id, used=["d0", "d1"]).applied
        ((a, b, strength, count, _),) = rr.state.list_edges("ns")
        assert (a, b, count) == ("d0", "d1", 1.0) and strength == pytest.approx(0.2)
        assert rr.stats()["feedbacks"] == 1


def test_a_failure_in_the_edge_update_rolls_the_whole_feedback_back(tmp_path, monkeypatch):
    path = tmp_path / "state.db"
    recall_id = _shown(path)
    with Reranker(SQLiteState(path), config=CONFIG) as rr:
        before = _snapshot(rr.state)

        def broken(*args, **kwargs):
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(sqlite_backend, "write_edges", broken)
        with pytest.raises(RuntimeError, match="disk on fire"):
            rr.feedback(recall_id, used=["d0", "d1"])
        assert _snapshot(rr.state) == before
    monkeypatch.undo()
    _retry_applies_once(path, recall_id)


CHILD = textwrap.dedent("""
    import os, signal, sys
    from heaprank import Config, CoUse, Learning, Reranker, SQLiteState
    from heaprank.state.sqlite import backend
    real = backend.write_edges

    def write_then_die(*args, **kwargs):
        out = real(*args, **kwargs)  # links and edges written, not committed
        os.kill(os.getpid(), signal.SIGKILL)
        return out

    backend.write_edges = write_then_die
    rr = Reranker(SQLiteState(sys.argv[1]), config=Config(learning=Learning(co_use=CoUse())))
    rr.feedback(sys.argv[2], used=["d0", "d1"])
""")


def test_kill_9_in_the_middle_of_the_edge_update_leaves_the_last_committed_state(tmp_path):
    path = tmp_path / "state.db"
    recall_id = _shown(path)
    with SQLiteState(path) as state:
        before = _snapshot(state)
    root = Path(__file__).resolve().parents[2]
    child = subprocess.run([sys.executable, "-c", CHILD, str(path), recall_id], cwd=root,
                           capture_output=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    with SQLiteState(path) as state:
        assert _snapshot(state) == before
    _retry_applies_once(path, recall_id)
