"""``heaprank tune``, ``replay`` and ``plot`` on a real SQLite state file."""

from __future__ import annotations

import json
import sys

import pytest

from heaprank import Config, SQLiteState
from heaprank.config import load_config, save_config
from tests.test_cli import cwd, run  # noqa: F401  (cwd: every command runs in an empty folder)
from tests.tuning_logs import record, synthetic_log

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def logged_state(tmp_path_factory) -> str:
    """A state file holding 1,200 impressions with feedback, drawn from a known model, in two
    namespaces."""
    path = tmp_path_factory.mktemp("state") / "state.db"
    state = SQLiteState(path, synchronous="OFF")
    record(state, synthetic_log(900, namespace="alice", seed=1)
           + synthetic_log(300, namespace="bob", seed=2, step_s=180.0))
    state.close()
    return f"sqlite:///{path}"


def test_tune_reports_without_writing_anything(logged_state, capsys):
    assert run(["tune", "--state", logged_state, "--namespace", "*"]) == 0
    out = capsys.readouterr().out
    assert "pooled (all namespaces): 1200 usable impressions (1200 used items), 240 held out" in out
    assert "namespace 'alice': 900 usable impressions" in out and "namespace 'bob'" in out
    assert "usefulness" in out and "90% interval" in out and "held-out log-likelihood" in out
    assert "moved: the fit on the earlier part predicts the held-out part better" in out


def test_tune_apply_writes_a_config_the_cli_and_the_library_load(logged_state, tmp_path, capsys):
    out_file = tmp_path / "tuned.json"
    assert run(["tune", "--state", logged_state, "--apply", "--out", str(out_file)]) == 0
    assert f"wrote the tuned config to {out_file}" in capsys.readouterr().out
    tuned = load_config(out_file)
    assert tuned.weights.usefulness == pytest.approx(2.5, abs=0.35)
    assert tuned.weights.relevance == pytest.approx(0.5, abs=0.2)
    assert tuned.learning == Config().learning
    # JSON report; the tuned file as the starting point of the next run
    assert run(["tune", "--state", logged_state, "--config", str(out_file), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["start"]["weights"] == tuned.to_dict()["weights"] and report["written"] is None
    assert report["pooled"]["impressions"] == 1200 and report["skipped"]["no_use"] == 0


def test_tune_apply_writes_nothing_when_the_fit_does_not_move(logged_state, tmp_path, capsys):
    out_file = tmp_path / "tuned.json"
    assert run(["tune", "--state", logged_state, "--apply", "--out", str(out_file),
                "--min-impressions", "5000"]) == 0
    out = capsys.readouterr().out
    assert "too little data: 1200 usable impressions, at least 5000 needed" in out
    assert "nothing written" in out and not out_file.exists()


def test_tune_never_changes_the_state(logged_state, tmp_path):
    path = logged_state[len("sqlite:///"):]
    before = SQLiteState(path, read_only=True).stats()
    assert run(["tune", "--state", logged_state, "--apply", "--out", str(tmp_path / "c.json")]) == 0
    assert SQLiteState(path, read_only=True).stats() == before


def test_replay_scores_a_config_file_against_the_logged_order(logged_state, tmp_path, capsys):
    truth = tmp_path / "truth.json"
    save_config(Config().with_weights(relevance=0.5, usefulness=2.5), truth)
    flat = tmp_path / "flat.json"
    save_config(Config().with_weights(relevance=0.0, usefulness=0.0), flat)
    scores = {}
    for name, path in (("truth", truth), ("flat", flat)):
        assert run(["replay", "--state", logged_state, "--config", str(path), "--json"]) == 0
        scores[name] = json.loads(capsys.readouterr().out)
    assert scores["truth"]["impressions"] == 1200
    assert scores["truth"]["mrr"] > scores["flat"]["mrr"] + 0.1
    assert scores["truth"]["logged_mrr"] == scores["flat"]["logged_mrr"]
    assert run(["replay", "--state", logged_state, "--namespace", "bob"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("300 usable impressions (300 used items)")
    assert "used@1" in out and "config" in out and "logged" in out


@pytest.mark.parametrize("argv, message", [
    (["tune", "--out", "x.json"], "--out: names the config file --apply writes; add --apply"),
    (["replay", "--config", "missing.json"], "missing.json"),
    (["tune", "--namespace", " "], "namespace"),
    (["plot", "links", "--out", "x.png", "--limit", "0"], "--limit: must be >= 1"),
])
def test_tuning_user_errors_are_one_line(logged_state, argv, message, capsys):
    at = 2 if argv[0] == "plot" else 1  # after the (sub)command's name
    assert run([*argv[:at], "--state", logged_state, *argv[at:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("heaprank: ") and message in err and err.count("\n") == 1


def test_tune_on_a_missing_state_creates_nothing(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert run(["tune", "--state", url]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


# ----------------------------------------------------------------------------------- plots

@pytest.mark.parametrize("plot, extra", [
    ("links", ["--limit", "10"]),
    ("links", ["--namespace", "bob"]),
    ("tune", ["--fit-half-life"]),
])
def test_plot_writes_a_png(logged_state, tmp_path, plot, extra, capsys):
    out_file = tmp_path / f"{plot}.png"
    assert run(["plot", plot, "--state", logged_state, "--out", str(out_file), *extra]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out_file}"
    data = out_file.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000


def test_plot_without_matplotlib_names_the_extra(logged_state, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails
    assert run(["plot", "links", "--state", logged_state, "--out", str(tmp_path / "x.png")]) == 2
    assert "pip install 'heaprank[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()

