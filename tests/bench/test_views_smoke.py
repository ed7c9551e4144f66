"""Smoke test of ``python -m benchmarks views`` on the tiny LoCoMo-format fixture: it builds a
real SQLite state by rerank and feedback, runs the real command line on it as subprocesses, and
leaves the state, the tuned config and the four plots behind; every JSON output parses."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import pytest

from benchmarks import REPO_ROOT
from benchmarks.quality import views
from heaprank import Config
from heaprank.config import load_config

pytestmark = pytest.mark.bench

FIXTURE = Path(__file__).with_name("locomo_tiny.json")
PNG = b"\x89PNG\r\n\x1a\n"


def test_views_build_a_state_and_run_every_command_on_it(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("bm25s")
    pytest.importorskip("matplotlib")
    state, tuned, figures, out = (tmp_path / "views.db", tmp_path / "tuned.json",
                                  tmp_path / "figures", tmp_path / "views.json")
    parser = argparse.ArgumentParser()
    views.add_arguments(parser)
    # Four rounds of the fixture's 17 questions: enough impressions for tune's time split.
    args = parser.parse_args([
        "--data", str(FIXTURE), "--conversations", "0,1", "--rounds", "4",
        "--min-impressions", "20", "--state", str(state), "--tuned", str(tuned),
        "--figures", str(figures), "--policy", str(REPO_ROOT / views.DEFAULT_POLICY),
        "--out", str(out), "--no-timing"])
    assert views.run(args) == 0
    printed = capsys.readouterr().out

    # The state is a real SQLite file holding what use left in it.
    with sqlite3.connect(state) as conn:
        impressions = conn.execute("SELECT count(*) FROM impressions WHERE fed = 1").fetchone()[0]
        links = conn.execute("SELECT count(*) FROM links").fetchone()[0]
    assert impressions == 68 and links > 0
    # The tuned config is a config file heaprank loads, with weights moved from the defaults.
    assert load_config(tuned).weights != Config().weights
    for name in views.FIGURES.values():
        data = (figures / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 20_000, name

    result = json.loads(out.read_text(encoding="utf-8"))
    commands = result["commands"]
    assert all(c["exit"] == 0 and not c["stderr"] for c in commands)
    assert all(c["command"] in printed for c in commands)  # every command is shown
    parsed = [c["json"] for c in commands if "--json" in c["command"].split()]
    assert len(parsed) == 3
    pooled, one = parsed[0], parsed[1]
    assert pooled["pooled"]["impressions"] == 68 and pooled["pooled"]["heldout_impressions"] > 0
    assert pooled["pooled"]["moved"] and set(pooled["pooled"]["intervals"]) >= {
        "relevance", "usefulness", "half_life_s"}
    assert list(one["namespaces"]) == [result["tuned_namespace"]]
    replayed = parsed[2]
    assert 0.0 < replayed["mrr"] <= 1.0 and replayed["impressions"] == 68
    assert "held-out log-likelihood per choice" in printed
    assert printed.count("preview only: nothing was deleted") == 2  # one per namespace
    assert f"wrote the tuned config to {tuned}" in printed
