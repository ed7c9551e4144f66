"""examples/mcp_agent.py runs as documented: the learned order survives a server restart and
puts a new question's dated fact first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_agent.py"


def test_the_mcp_agent_example_learns_across_a_restart(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path / "agent.db")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "first for the new question: car-service (the retriever put it 2)" in done.stdout
    assert (tmp_path / "agent.db").exists()
