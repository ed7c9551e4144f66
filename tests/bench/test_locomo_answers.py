"""Feedback as an app gives it (issue 34, item 4): ``--feedback answer``, ``answer-restated``
and ``cites`` on the tiny LoCoMo fixture, and the simulation's parts one by one."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.quality import locomo
from benchmarks.quality.harness.answers import (
    NOT_MENTIONED,
    AttributionTally,
    biased_citations,
    model_answer,
    p_cite,
    p_false,
    restate,
    simulated_used,
)
from heaprank.learning.attribution import Shown

pytestmark = pytest.mark.bench

FIXTURE = Path(__file__).with_name("locomo_tiny.json")


def run_bench(capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    pytest.importorskip("bm25s")
    parser = argparse.ArgumentParser(prog="python -m benchmarks locomo")
    locomo.add_arguments(parser)
    args = parser.parse_args(["--data", str(FIXTURE), "--json", "--no-progress", "--no-timing",
                              "--resamples", "100", *extra])
    assert locomo.run(args) == 0
    return json.loads(capsys.readouterr().out)


def test_restating_keeps_the_questions_words_around_the_answer():
    assert restate("When did Caroline go to the support group?", "7 May 2023") == \
        "As far as I remember, Caroline go to the support group: 7 May 2023."
    assert restate("What?", "Pottery") == "Pottery."
    assert model_answer("", "Did Melanie paint?", "answer") == NOT_MENTIONED  # adversarial


def test_the_citing_model_is_biased_by_position_and_seeded():
    assert [p_cite(i) for i in range(10)] == sorted((p_cite(i) for i in range(10)), reverse=True)
    assert p_false(0) > p_false(9) and p_cite(9) > p_false(0)
    shown = [f"d{i}" for i in range(10)]
    draws = [biased_citations(np.random.default_rng([7, n]), shown, frozenset({"d0", "d9"}))
             for n in range(2000)]
    top = np.mean(["d0" in d for d in draws])
    bottom = np.mean(["d9" in d for d in draws])
    assert top == pytest.approx(p_cite(0), abs=0.03) and bottom == pytest.approx(p_cite(9), abs=0.03)
    assert biased_citations(np.random.default_rng(3), shown, frozenset()) == \
        biased_citations(np.random.default_rng(3), shown, frozenset())


def test_the_answer_is_attributed_by_heapranks_own_detector_or_not_at_all():
    shown = [Shown("D1:1", (), "Caroline: I'm researching adoption agencies."),
             Shown("D1:2", (), "Melanie: I painted a sunrise.")]
    ev = frozenset({"D1:1"})
    q = "What did Caroline research?"
    assert simulated_used("answer", gold="Adoption agencies", question=q, shown=shown,
                          evidence=ev, rng=None) == ["D1:1"]
    assert simulated_used("answer", gold="", question=q, shown=shown, evidence=ev,
                          rng=None) is None  # "not mentioned": abstain, no feedback
    with pytest.raises(ValueError, match="mode"):
        simulated_used("guess", gold="x", question=q, shown=shown, evidence=ev, rng=None)


def test_the_tally_gives_precision_recall_and_the_share_attributed():
    tally = AttributionTally()
    tally.add(["a", "x"], ["a", "b", "x"], frozenset({"a", "b"}))  # 1 of 2 right, 1 of 2 found
    tally.add(None, ["a", "y"], frozenset({"a"}))  # abstained: its evidence counts as missed
    tally.add([], ["z"], frozenset({"q"}))  # no evidence shown, nothing used
    s = tally.summary()
    assert (s["answers"], s["abstained"], s["with_evidence"], s["found"]) == (3, 1, 2, 1)
    assert s["precision"] == 0.5 and s["recall"] == pytest.approx(1 / 3, abs=1e-4)
    assert s["attributed_share"] == pytest.approx(2 / 3, abs=1e-4) and s["found_share"] == 0.5


@pytest.mark.parametrize("mode", ["answer", "answer-restated", "cites"])
def test_each_app_mode_is_a_row_beside_the_oracle_it_is_judged_against(capsys, mode):
    out = run_bench(capsys, "--feedback", mode, "--rows", "core")
    keys = {r["key"] for r in out["rows"]}
    assert {f"heaprank_{mode}", "heaprank_oracle", "heaprank_default"} <= keys
    target = out["targets"]["app_feedback_keeps_half"]
    assert target["met"] == (target["ratio"] >= 0.5)
    tally = out["diagnostics"]["attribution"][mode]
    assert 0.0 <= tally["precision"] <= 1.0 and 0.0 <= tally["recall"] <= 1.0
    assert tally["answers"] >= tally["abstained"] >= 0


def test_first_stage_runs_add_the_app_mode_and_judge_it_on_bm25(capsys):
    out = run_bench(capsys, "--first-stage", "bm25", "--levers", "day-one", "--feedback", "cites",
                    "--dev-conversations", "0", "--cache", "none")
    assert "heaprank_cites" in {r["key"] for r in out["rows"]}
    [verdict] = [t for items in out["targets"].values() for t in items
                 if t["target"].startswith("cites feedback keeps")]
    assert verdict["pass"] == (verdict["ratio"] >= 0.5)
    assert out["attribution"]["cites"]["answers"] > 0
