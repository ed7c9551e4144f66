"""``python -m heaprank mcp`` as a subprocess over stdio, spoken to line by line: every line it
writes on stdout is a JSON-RPC message (logs go to stderr), and what it learned is in the
state file for the next process."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytest.importorskip("mcp")

from tests.mcp.conftest import candidates  # noqa: E402

pytestmark = pytest.mark.slow


class StdioServer:
    """A ``heaprank mcp`` process and the JSON-RPC requests sent to it."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "heaprank", "mcp", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.next_id = 0

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                   **({"params": params} if params is not None else {})})
        line = self.proc.stdout.readline()
        message = json.loads(line)  # a log line on stdout would fail here
        assert message["jsonrpc"] == "2.0" and message["id"] == self.next_id, line
        assert "error" not in message, message
        return message["result"]

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def call(self, tool: str, arguments: dict) -> dict:
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert not result.get("isError"), result
        return result["structuredContent"]

    def close(self) -> tuple[str, str]:
        """Close stdin (the server then exits) and return what is left of stdout, and stderr."""
        out, err = self.proc.communicate(timeout=20)
        assert self.proc.returncode == 0, err
        return out, err


def _session(state: str) -> tuple[dict, list[str], dict, dict, dict, str, str]:
    server = StdioServer("--state", state, "--namespace", "user:maya")
    init = server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "test", "version": "0"}})
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    names = [t["name"] for t in server.request("tools/list")["tools"]]
    ranked = server.call("rerank", {"query": "When does Maya's flight leave?",
                                    "candidates": candidates(), "k": 3})
    fed = server.call("feedback", {"recall_id": ranked["recall_id"], "used": ["m3"]})
    links = server.call("links", {})
    out, err = server.close()
    return init, names, ranked, fed, links, out, err


def test_stdio_speaks_json_rpc_on_stdout_and_logs_on_stderr(tmp_path):
    state = f"sqlite:///{tmp_path}/state.db"
    init, names, ranked, fed, links, out, err = _session(state)
    assert init["serverInfo"]["name"] == "heaprank" and "rerank" in init["instructions"]
    assert names == ["rerank", "feedback", "why_not", "links", "stats"]
    assert ranked["namespace"] == "user:maya" and len(ranked["results"]) == 3
    assert fed["recorded"]["used"] == 1 and fed["recorded"]["ignored"] == 2
    assert links["namespace"] == "user:maya" and links["total"] > 0
    assert out == ""  # nothing but the answers read above
    assert "heaprank mcp INFO" in err and "serving stdio" in err

    # the next process on the same file starts from what this one learned
    again = _session(state)[4]
    assert again["links"][0]["n"] > links["links"][0]["n"]


def test_answers_to_a_file_are_written_on_the_sdk_s_own_transport(tmp_path):
    """stdout a regular file (no pipe for the event loop): the SDK's threaded stdio serves.
    stdin stays open until both answers are there, as a client's does (at end of input the
    SDK may drop a request still in flight)."""
    out = tmp_path / "answers.jsonl"
    with out.open("w") as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "heaprank", "mcp", "--state", "memory://"],
                                stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE,
                                text=True)
        for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                            "protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "test", "version": "0"}}},
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}):
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while len(out.read_text().splitlines()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
        proc.stderr.close()
    answers = [json.loads(line) for line in out.read_text().splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    assert len(answers[1]["result"]["tools"]) == 5
