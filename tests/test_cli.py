"""The command line: demo, links, explain, stats, with --state and --json."""

from __future__ import annotations

import json

import pytest

from heaprank.cli import main


@pytest.fixture()
def state_url(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    assert main(["demo", "--state", url]) == 0
    return url


def test_demo_prints_both_days(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "=== 1. Day one" in out and "=== 2. After" in out
    assert "Strongest learned links" in out


def test_links_json_lists_pooled_links(state_url, capsys):
    capsys.readouterr()
    assert main(["links", "--state", state_url, "--json", "--limit", "5"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 5
    assert all(0 < r["p"] < 1 and r["low"] <= r["p"] <= r["high"] for r in rows)
    assert rows[0]["p"] >= rows[-1]["p"]


def test_links_of_a_namespace_table(state_url, capsys):
    capsys.readouterr()
    assert main(["links", "--state", state_url, "--namespace", "user:00"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("feature") and "P(useful)" in out


def test_stats_counts_feedbacks(state_url, capsys):
    capsys.readouterr()
    assert main(["stats", "--state", state_url, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["feedbacks"] == 120 and stats["namespaces"] == 40


def test_explain_ranks_a_candidates_file(state_url, tmp_path, capsys):
    path = tmp_path / "cands.json"
    path.write_text(json.dumps([
        {"id": "a", "text": "The dentist is on Monday at 10:00", "score": 1.8,
         "metadata": {"kind": "fact"}},
        {"id": "b", "text": "I should find a better dentist", "score": 2.0,
         "metadata": {"kind": "episode"}},
        {"id": "c", "text": "The dentist near the office closed", "score": 0.5},
    ]))
    capsys.readouterr()
    assert main(["explain", "--state", state_url, "--query", "When is my dentist?",
                 "--candidates", str(path), "--namespace", "user:new", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["qtype"] == "when"
    assert [r["id"] for r in data["results"]] == ["a", "b", "c"]  # learned usefulness beats the match
    assert "useful" in data["results"][0]["explain"]


def test_missing_state_file_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit, match="no state at"):
        main(["stats", "--state", f"sqlite:///{tmp_path / 'missing.db'}"])


def test_bad_candidates_exit_2_with_the_field_named(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"id": "a", "text": "x", "score": 1.0,
                                 "metadata": {"importance": -1}}]))
    assert main(["explain", "--state", f"sqlite:///{tmp_path / 's.db'}", "--query", "q",
                 "--candidates", str(path)]) == 2
    assert "importance" in capsys.readouterr().err
