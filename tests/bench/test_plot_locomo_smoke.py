"""Smoke test of ``python -m benchmarks plot-locomo``: RESULTS.md's LoCoMo figure is drawn again
from the four runs kept in ``benchmarks/results/``."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import main
from benchmarks.quality.plot_locomo import DEFAULT_RESULTS

pytestmark = pytest.mark.bench


def test_the_figure_is_drawn_from_the_kept_runs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert all(path.is_file() for path in DEFAULT_RESULTS)
    out = tmp_path / "locomo_mrr.png"
    assert main(["plot-locomo", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out.strip() == str(out)
