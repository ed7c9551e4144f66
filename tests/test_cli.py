"""The command line: demo, links, explain, stats, with --state and --json; user errors are one line
on stderr and exit 2, and no command creates a state it was only asked to read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from heaprank.app.cli import main

CANDIDATES = [
    {"id": "a", "text": "The dentist is on Monday at 10:00", "score": 1.8, "metadata": {"kind": "fact"}},
    {"id": "b", "text": "I should find a better dentist", "score": 2.0, "metadata": {"kind": "episode"}},
    {"id": "c", "text": "The dentist near the office closed", "score": 0.5},
]


@pytest.fixture(autouse=True)
def cwd(tmp_path, monkeypatch) -> Path:
    """Every command runs in an empty folder with no HEAPRANK_STATE; it must stay empty."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.delenv("HEAPRANK_STATE", raising=False)
    yield folder
    assert sorted(p.name for p in folder.iterdir()) == [], "the command left files in the cwd"


@pytest.fixture()
def inputs(tmp_path) -> Path:
    folder = tmp_path / "inputs"
    folder.mkdir()
    (folder / "cands.json").write_text(json.dumps(CANDIDATES), encoding="utf-8")
    return folder


@pytest.fixture()
def state_url(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    assert main(["demo", "--state", url]) == 0
    return url


def run(argv: list[str]) -> int:
    """``main``'s exit status, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


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


def test_explain_ranks_a_candidates_file(state_url, inputs, capsys):
    capsys.readouterr()
    assert main(["explain", "--state", state_url, "--query", "When is my dentist?",
                 "--candidates", str(inputs / "cands.json"), "--namespace", "user:new", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["qtype"] == "when"
    assert [r["id"] for r in data["results"]] == ["a", "b", "c"]  # learned usefulness beats the match
    assert "useful" in data["results"][0]["explain"]


def test_explain_without_state_ranks_in_memory_and_creates_no_file(inputs, capsys):
    assert main(["explain", "--query", "When is my dentist?", "--candidates",
                 str(inputs / "cands.json"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # Nothing learned: the retriever's order moves only by importance (fact over episode).
    assert [r["id"] for r in data["results"]] == ["a", "b", "c"]
    # The autouse fixture checks that no ./heaprank.db (or -wal/-shm) was left behind.


def test_explain_reads_an_existing_default_state_without_writing_it(cwd, inputs, capsys):
    assert main(["demo", "--state", "sqlite:///heaprank.db"]) == 0
    assert main(["stats", "--json"]) == 0
    capsys.readouterr()
    before = (cwd / "heaprank.db").read_bytes()
    assert main(["explain", "--query", "When is my dentist?", "--candidates",
                 str(inputs / "cands.json"), "--namespace", "user:new", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "useful" in data["results"][0]["explain"]  # the learned links were read
    assert (cwd / "heaprank.db").read_bytes() == before
    (cwd / "heaprank.db").unlink()  # the fixture checks nothing else was left


def _write(folder: Path, name: str, content: str | bytes) -> str:
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


def _explain(candidates: str, *extra: str) -> list[str]:
    return ["explain", "--query", "When is my dentist?", "--candidates", candidates, *extra]


USER_ERRORS = {
    # name: (argv from the inputs folder, what the one line must say)
    "missing candidates file": (lambda d: _explain(str(d / "missing.json")), "cannot read"),
    "candidates is a folder": (lambda d: _explain(str(d)), "cannot read"),
    "bad JSON": (lambda d: _explain(_write(d, "bad.json", '[{"id": "a",')), "not valid JSON"),
    "not UTF-8": (lambda d: _explain(_write(d, "latin1.json", b'[{"id": "caf\xe9"}]')), "not UTF-8"),
    "object without candidates": (lambda d: _explain(_write(d, "o.json", '{"a": 1}')), "JSON list"),
    "a number": (lambda d: _explain(_write(d, "n.json", "5")), "JSON list"),
    "item of the wrong type": (lambda d: _explain(_write(d, "i.json", "[1, 2]")), "candidates[0]"),
    "id of the wrong type": (lambda d: _explain(_write(d, "t.json", '[{"id": 1, "text": "x"}]')),
                             "candidates[0].id"),
    "text of the wrong type": (lambda d: _explain(_write(d, "x.json", '[{"id": "a", "text": 5}]')),
                               "text"),
    "bad importance": (lambda d: _explain(_write(d, "m.json", json.dumps(
        [{"id": "a", "text": "x", "score": 1.0, "metadata": {"importance": -1}}]))), "importance"),
    "bad --now": (lambda d: _explain(str(d / "cands.json"), "--now", "yesterday"), "now"),
    "--now not finite": (lambda d: _explain(str(d / "cands.json"), "--now", "nan"), "--now"),
    "unknown state URL": (lambda d: _explain(str(d / "cands.json"), "--state", "foo://x"),
                          "unknown backend URL"),
    "sqlite URL without a file": (lambda d: _explain(str(d / "cands.json"), "--state", "sqlite://"),
                                  "names no file"),
    "explain on a missing state": (lambda d: _explain(str(d / "cands.json"), "--state",
                                                      f"sqlite:///{d / 'none.db'}"), "no state at"),
    "k of 0": (lambda d: _explain(str(d / "cands.json"), "-k", "0"), "k"),
    "links on a missing default state": (lambda d: ["links"], "no state at"),
    "stats on a missing state": (lambda d: ["stats", "--state", f"sqlite:///{d / 'none.db'}"],
                                 "no state at"),
    "negative --limit": (lambda d: ["links", "--limit", "-1"], "--limit: must be >= 0"),
    "negative --min-n": (lambda d: ["links", "--min-n", "-2"], "--min-n: must be >= 0"),
    "the removed bench command": (lambda d: ["bench", "locomo"], "invalid choice: 'bench'"),
}


@pytest.mark.parametrize("case", sorted(USER_ERRORS))
def test_user_errors_are_one_line_and_exit_2(case, inputs, capsys):
    argv_of, expected = USER_ERRORS[case]
    assert run(argv_of(inputs)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("heaprank: ") and expected in lines[0], lines[0]
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("argv", [
    ["explain", "--query", "q", "--candidates", "missing.json"],
    ["links", "--limit", "-5"],
])
def test_the_installed_command_prints_no_traceback(argv, cwd):
    proc = subprocess.run([sys.executable, "-m", "heaprank", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("heaprank: "), proc.stderr
