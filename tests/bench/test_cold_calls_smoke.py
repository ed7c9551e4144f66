"""Smoke test of ``python -m benchmarks cold-calls``: a few repetitions, every row printed.
No timing assertions."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import main
from benchmarks.speed import cold_calls

pytestmark = pytest.mark.bench


def test_every_row_is_measured(capsys):
    assert main(["cold-calls", "--reps", "3", "--cold-mb", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "19 numpy calls on arrays of 50" in out and "300 dict inserts" in out


def test_the_numpy_calls_make_an_order_of_the_candidates():
    import numpy as np

    rng = np.random.default_rng(1)
    x = rng.random(50)
    order = cold_calls._numpy_calls(x, rng.random((50, 6)) + 0.01, rng.random(6))
    assert sorted(order.tolist()) == list(range(50))
