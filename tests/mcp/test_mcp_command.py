"""``heaprank mcp``'s command line: what it refuses before serving anything (one line on stderr,
exit 2), and the error naming the extra when the SDK is missing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from heaprank.app.cli import main


@pytest.mark.parametrize(("args", "message"), [
    (["--http", "0.0.0.0:8765"], "'0.0.0.0' is not a loopback address"),
    (["--http", "192.0.2.7:8765"], "pass --tokens FILE"),
    (["--http", "example.org:8765"], "not a loopback address"),
    (["--http", "127.0.0.1"], "--http: expected HOST:PORT"),
    (["--http", "127.0.0.1:99999"], "--http: expected HOST:PORT"),
    (["--namespace", "*"], "namespace: '*' is reserved"),
    (["--keep-rankings", "-1"], "--keep-rankings: must be >= 0"),
])
def test_a_bad_command_line_is_one_line_on_stderr(args, message, capsys):
    pytest.importorskip("mcp")
    assert main(["mcp", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("heaprank: ") and message in err and err.count("\n") == 1


def test_tokens_go_with_http_and_a_weak_token_is_refused_without_being_shown(tmp_path, capsys):
    pytest.importorskip("mcp")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"0123456789abcdef-token": ["user:maya"]}))
    assert main(["mcp", "--tokens", str(tokens)]) == 2
    assert "--tokens: goes with --http" in capsys.readouterr().err
    tokens.write_text(json.dumps({"short-secret": ["user:maya"]}))
    assert main(["mcp", "--http", "0.0.0.0:8765", "--tokens", str(tokens)]) == 2
    err = capsys.readouterr().err
    assert "at least 16 characters" in err and "short-secret" not in err


def test_without_the_sdk_the_command_names_the_extra():
    code = ("import sys; sys.modules['mcp'] = None\n"
            "from heaprank.app.cli import main; raise SystemExit(main(['mcp']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "pip install 'heaprank[mcp]'" in done.stderr


def test_help_lists_the_mcp_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "mcp" in capsys.readouterr().out
