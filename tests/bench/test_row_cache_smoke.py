"""Smoke test of ``python -m benchmarks row-cache``: a few reranks in each mode, every row
printed. No timing assertions."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import main
from benchmarks.speed import row_cache

pytestmark = pytest.mark.bench


def test_both_modes_are_measured_side_by_side(capsys):
    main(["row-cache", "--reranks", "20", "--candidates", "2"])
    out = capsys.readouterr().out
    assert "20 reranks of 2 candidates" in out
    assert "\nkernels" in out and "\npure Python" in out and "target: the worst rerank" in out


def test_each_rerank_is_timed_in_process():
    got = row_cache.measure(5, 3)
    assert got["worst_ms"] >= got["median_ms"] > 0 and 0 <= got["worst_at"] < 5
    assert got["worst_cpu_ms"] >= got["worst_cpu_no_full_gc_ms"] >= 0 and got["full_gcs"] >= 0
