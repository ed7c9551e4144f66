"""Smoke test of ``python -m benchmarks refit-cost``: a small log on memory and SQLite, the
printed table and the JSON. No timing assertions."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.speed import refit_cost

pytestmark = pytest.mark.bench


def test_refit_cost_prints_a_row_per_backend_and_size(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="python -m benchmarks refit-cost")
    refit_cost.add_arguments(parser)
    out = tmp_path / "refit.json"
    args = parser.parse_args(["--sizes", "120", "--backends", "memory,sqlite", "--repeats", "1",
                              "--reranks", "30", "--out", str(out)])
    assert refit_cost.run(args) == 0
    text = capsys.readouterr().out
    assert "One continuous re-fit" in text and "rerank 50 + EXPLAIN" in text
    report = json.loads(out.read_text())
    assert [(r["backend"], r["impressions"]) for r in report["rows"]] == [
        ("memory", 120), ("sqlite", 120)]
    assert all(r["refit_ms"] > 0 and r["gain"] is not None for r in report["rows"])
    assert set(report["rerank_50_explain"]) == {"refit_on_us", "refit_off_us"}
