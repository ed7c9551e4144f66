"""The command line's mistakes of the user are one line and exit 2 (an unknown namespace, a
write mode on a reading command, a plot to a missing folder, a path without its scheme, a word
where a number goes), and every --help prints."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from heaprank.app.cli import _parser
from heaprank.app.options import FEATURES
from tests.test_cli import run


@pytest.fixture()
def state_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The demo's state, in a folder that is also the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HEAPRANK_STATE", raising=False)
    assert run(["demo", "--state", f"sqlite:///{tmp_path / 'state.db'}"]) == 0
    return f"sqlite:///{tmp_path / 'state.db'}"


ERRORS = {
    "a word for --limit": (["links", "--limit", "abc"], "--limit: expected a whole number >= 0, got 'abc'"),
    "a word for --min-n": (["links", "--min-n", "lots"], "--min-n: expected a number >= 0, got 'lots'"),
    "a word for plot --limit": (["plot", "links", "--out", "x.png", "--limit", "ten"],
                                "--limit: expected a whole number >= 1, got 'ten'"),
    "an unknown namespace": (["links", "--namespace", "nobody"], "'nobody' has nothing in this state"),
    "an unknown namespace to tune": (["tune", "--namespace", "nobody"], "'nobody' has nothing"),
    "an unknown namespace to plot": (["plot", "links", "--namespace", "nobody", "--out", "l.png"],
                                     "'nobody' has nothing"),
    "mode=rw on a reading command": (["links", "--state", "{state}?mode=rw"],
                                     "mode=rw in 'sqlite:///"),
    "mode=rwc on stats": (["stats", "--state", "{state}?mode=rwc"], "opens it read-only"),
    "a plot into a missing folder": (["plot", "links", "--out", "/nodir/x.png"],
                                     "--out: cannot write '/nodir/x.png': folder '/nodir' does not exist"),
    "a plot onto a folder": (["plot", "links", "--out", "{tmp}/taken.png"], "--out: cannot write"),
    "a path without sqlite:///": (["links", "--state", "heaprank.db"],
                                  "(for a SQLite file: 'sqlite:///heaprank.db')"),
    "an unclosed IPv6 host": (["stats", "--state", "redis://:s3cret@[::1"],
                              "state: not a valid URL (Invalid IPv6 URL)"),
    "an unclosed IPv6 host to copy": (["state", "copy", "redis://[::1", "{tmp}/copy.db"],
                                      "state: not a valid URL"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_user_errors_are_one_line_and_exit_2(case: str, state_url: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    argv, expected = ERRORS[case]
    argv = [a.replace("{state}", state_url).replace("{tmp}", str(tmp_path)) for a in argv]
    (tmp_path / "taken.png").mkdir()  # a folder where a plot would go
    if "--state" not in argv and argv[0] in ("links", "tune", "plot", "stats"):
        argv += ["--state", state_url]
    assert run(argv) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("heaprank: ") and expected in line, line
    assert "Traceback" not in captured.err and "Errno" not in line
    assert "s3cret" not in captured.err  # a URL's password is never echoed


def test_a_namespace_of_the_state_and_the_pooled_layer_still_work(state_url: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["links", "--state", state_url, "--namespace", "*", "--limit", "2"]) == 0
    assert run(["links", "--state", state_url + "?mode=ro", "--limit", "1"]) == 0
    assert "P(useful)" in capsys.readouterr().out


def _parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(parser.prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                out += _parsers(child)
    return out


@pytest.mark.parametrize("prog", [name for name, _ in _parsers(_parser())])
def test_every_help_prints(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = prog.split()[1:] + ["--help"]
    assert run(argv) == 0
    assert "usage:" in capsys.readouterr().out


def test_links_help_explains_the_feature_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["links", "--help"]) == 0
    out = capsys.readouterr().out
    assert FEATURES.splitlines()[0] in out
    for name in ("qsrc:yes", "qent:yes", "qt:when&date:yes", "kind:fact", "len:<=10"):
        assert name in out
