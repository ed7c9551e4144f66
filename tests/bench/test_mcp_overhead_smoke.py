"""Smoke test of ``python -m benchmarks mcp-overhead``: a few rounds on each path, the printed
table and the JSON. No timing assertions."""

from __future__ import annotations

import argparse
import json

import pytest

pytest.importorskip("mcp")

from benchmarks.speed import mcp_overhead  # noqa: E402

pytestmark = pytest.mark.bench


def test_mcp_overhead_times_the_three_paths_side_by_side(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="python -m benchmarks mcp-overhead")
    mcp_overhead.add_arguments(parser)
    out = tmp_path / "mcp.json"
    args = parser.parse_args(["--rounds", "4", "--warmup", "1", "--candidates", "12", "-k", "4",
                              "--sets", "3", "--backend", "memory", "--out", str(out)])
    assert mcp_overhead.run(args) == 0
    text = capsys.readouterr().out
    assert "rerank of 12 candidates (top 4, EXPLAIN) + feedback, memory state" in text
    report = json.loads(out.read_text())
    assert list(report["paths"]) == ["in-process", "stdio raw", "stdio SDK"]
    assert all(row["median_ms"] > 0 for row in report["paths"].values())
    assert "added_ms" in report["paths"]["stdio SDK"]
    assert report["paths"]["in-process"]["cpu_ms"] > 0 and "cpu_ms" in report["paths"]["stdio raw"]
