"""Smoke test of ``python -m benchmarks feedback-procs-ab``: this checkout against a link to
its own package, one round of a few feedbacks per process. No timing assertions."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.__main__ import main
from benchmarks.speed.feedback_procs import PLAN

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[2]


def test_both_checkouts_are_measured_in_every_configuration(tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "heaprank").symlink_to(ROOT / "heaprank", target_is_directory=True)
    assert main(["feedback-procs-ab", "--against", str(other), "--rounds", "2",
                 "--per-process", "8"]) == 0
    out = capsys.readouterr().out
    assert out.count("round 1 ") == 2 and out.count("round 2 ") == 2
    assert "C kernels: this " in out
    summary = out.split("x faster\n", 1)[1].splitlines()
    assert [line.split("  ")[0] for line in summary] == [
        f"{sync} {procs}p x{group}" for sync, procs, group in PLAN]


def test_a_folder_without_heaprank_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        main(["feedback-procs-ab", "--against", str(tmp_path)])
