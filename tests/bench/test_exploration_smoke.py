"""Smoke test of ``python -m benchmarks exploration`` on the tiny LoCoMo-format fixture: the JSON
shape, the rate-0 reference row, metric ranges and determinism."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.quality import exploration

pytestmark = pytest.mark.bench

FIXTURE = Path(__file__).with_name("locomo_tiny.json")


def run_bench(capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    pytest.importorskip("bm25s")
    parser = argparse.ArgumentParser(prog="python -m benchmarks exploration")
    exploration.add_arguments(parser)
    args = parser.parse_args(["--data", str(FIXTURE), "--conversations", "0,1", "--json",
                              "--resamples", "200", "--seeds", "2", "--rates", "0.5", *extra])
    assert exploration.run(args) == 0
    result = json.loads(capsys.readouterr().out)
    result.pop("seconds")
    return result


@pytest.mark.parametrize("feedback", exploration.FEEDBACK)
def test_rows_ranges_and_determinism(capsys: pytest.CaptureFixture[str], feedback: str) -> None:
    res = run_bench(capsys, "--feedback", feedback)
    assert res["benchmark"] == "exploration" and res["feedback"] == feedback
    assert [r["rate"] for r in res["rows"]] == [0.0, 0.5]  # rate 0 is always the reference
    zero = res["rows"][0]
    assert zero["vs_rate0"] == 0.0 and zero["online_cost"] == 0.0
    for row in res["rows"]:
        assert 0.0 <= row["online_mrr"] <= 1.0 and 0.0 <= row["heldout_mrr"] <= 1.0
        assert row["heldout_ci"][0] <= row["heldout_mrr"] <= row["heldout_ci"][1]
    assert 0.0 <= res["bm25_mrr"] <= 1.0 and 0.0 <= res["unbiased_mrr"] <= 1.0
    assert run_bench(capsys, "--feedback", feedback) == res


def test_a_single_conversation_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    exploration.add_arguments(parser)
    assert exploration.run(parser.parse_args(["--data", str(FIXTURE), "--conversations", "0"])) == 2
    assert "at least 2 conversations" in capsys.readouterr().err
