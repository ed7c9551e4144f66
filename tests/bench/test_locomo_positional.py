"""``python -m benchmarks locomo --feedback positional``: the simulated reader examines rank r
with probability 1/r and cites only the evidence it examined; heaprank runs with the fixed and
the fitted reject curve (and the true curve, as a reference) side by side."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.quality.harness.runner import Positional, cited, examination_truth, feedback_noise
from tests.bench.test_locomo_smoke import run_bench

pytestmark = pytest.mark.bench


def test_the_reader_cites_only_the_evidence_it_examined():
    shown = [f"d{r}" for r in range(1, 11)]
    evidence = frozenset(shown)
    draws = np.array([0.99, 0.4, 0.4, 0.3, 0.1, 0.9, 0.9, 0.9, 0.9, 0.05])
    # rank 1 is always examined; rank r when its draw is below 1/r
    assert cited(Positional(draws), shown, evidence) == ["d1", "d2", "d5", "d10"]
    assert cited(Positional(draws), shown, frozenset({"d3", "d5"})) == ["d5"]


def test_the_readers_examination_rate_is_the_true_curve():
    hits = np.zeros(10)
    shown = [f"d{r}" for r in range(10)]
    for qi in range(4000):
        answers, draws = feedback_noise("positional", 0, 1, qi)
        assert answers
        used = cited(draws, shown, frozenset(shown))
        hits[[shown.index(d) for d in used]] += 1
    assert np.abs(hits / 4000 - examination_truth()).max() < 0.03


def test_positional_runs_log_fitted_and_true_curve_side_by_side(capsys):
    res = run_bench(capsys, "--feedback", "positional", "--rows", "core")
    keys = {r["key"] for r in res["rows"]}
    assert {"heaprank_positional", "heaprank_positional_fitted",
            "heaprank_positional_true_curve"} <= keys
    pairs = {(c["a"], c["b"]) for c in res["comparisons"]}
    assert ("heaprank_positional_fitted", "heaprank_positional") in pairs
    exam = res["diagnostics"]["examination"]
    assert exam["true"][:3] == [1.0, 0.5, 0.3333]
    for curve in exam["fitted_by_fold"].values():  # a tiny log: the log curve stands
        assert curve["curve"] == "log" and curve["needs"] == 500
