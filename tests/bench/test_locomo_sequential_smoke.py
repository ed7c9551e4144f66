"""Smoke tests of ``python -m benchmarks locomo-sequential`` on the tiny LoCoMo-format fixture:
the order (each question scored before its own feedback), rows from names and from JSON,
determinism, and clear errors for bad rows."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.quality import locomo_sequential as seq
from benchmarks.quality.harness.data import load_locomo
from heaprank import CoUse

pytestmark = pytest.mark.bench

FIXTURE = Path(__file__).with_name("locomo_tiny.json")


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    pytest.importorskip("bm25s")
    pytest.importorskip("tqdm")
    parser = argparse.ArgumentParser(prog="python -m benchmarks locomo-sequential")
    seq.add_arguments(parser)
    args = parser.parse_args(["--data", str(FIXTURE), "--no-progress", "--no-timing",
                              "--resamples", "200", *extra])
    code = seq.run(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_rows_by_name_and_by_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "--json", "--rows", "bm25,default,co-use",
                    "--row", 'w2={"learning": {"co_use": {"seeds": 3}}, "weights": {"association": 2}}')
    assert code == 0
    res = json.loads(out)
    assert [r["row"] for r in res["rows"]] == ["bm25", "default", "co-use", "w2"]
    assert res["n_questions"] == 17 and res["n_later"] > 0
    for row in res["rows"]:
        assert 0.0 <= row["mrr"] <= 1.0 and row["mrr_ci"][0] <= row["mrr"] <= row["mrr_ci"][1]
    assert "vs_bm25" in res["rows"][1] and "vs_default" in res["rows"][2]
    assert res["rows"][2]["edges"] > 0  # the fixture's answers use turns together
    assert res["rows"][2]["questions_reached"]["with_edges"] >= 0


def test_the_same_command_prints_the_same_text(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = run(capsys)[1], run(capsys)[1]
    assert first == second and "later vs default" in first


def test_noisy_feedback_answers_about_half_the_questions(capsys: pytest.CaptureFixture[str]) -> None:
    oracle = json.loads(run(capsys, "--json", "--rows", "default")[1])
    noisy = json.loads(run(capsys, "--json", "--rows", "default", "--feedback", "noisy")[1])
    assert noisy["feedback"] == "noisy" and 0.0 <= noisy["rows"][0]["mrr"] <= 1.0
    assert 0 < noisy["rows"][0]["feedbacks"] < oracle["rows"][0]["feedbacks"]  # half answer


def test_bad_rows_are_refused_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "--rows", "bm25,nonsense")
    assert code == 2 and "unknown row 'nonsense'" in out
    code, out = run(capsys, "--row", "no-equals-sign")
    assert code == 2 and "expected NAME=JSON" in out


def test_each_conversation_is_asked_in_one_seeded_order() -> None:
    data = load_locomo(FIXTURE)
    sequence = seq.question_sequence(data, 0)
    assert sorted(qi for qi, _ in sequence) == list(range(len(data.questions)))
    for conv in range(len(data.conversations)):
        positions = [j for qi, j in sequence if data.questions[qi].conv == conv]
        assert positions == list(range(len(positions)))
    assert seq.question_sequence(data, 1) != sequence


def test_config_from_json_builds_the_nested_settings() -> None:
    cfg = seq.config_from_json({"learning": {"co_use": {"max_edges": 7}, "prior": {"mean": 0.02}},
                                "weights": {"association": 0.5}, "features": {"tag_slots": ["x"]}})
    assert cfg.learning.co_use == CoUse(max_edges=7) and cfg.weights.association == 0.5
    assert cfg.features.tag_slots == ("x",) and cfg.learning.prior.mean == 0.02
