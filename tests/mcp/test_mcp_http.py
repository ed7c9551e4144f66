"""``heaprank mcp --http`` on loopback with ``--tokens``: a request without a valid bearer token
is answered 401, a token works in its own namespaces only, and what it is told never shows
another tenant's data."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("mcp")

from heaprank.records import new_recall_id  # noqa: E402
from tests.mcp.conftest import candidates  # noqa: E402

MAYA = "maya-0123456789abcdef"
BOB = "bob-0123456789abcdefgh"
OPS = "operator-0123456789abcdef"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"}}}

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mcp-http")
    tokens = folder / "tokens.json"
    tokens.write_text(json.dumps({MAYA: ["user:maya"], BOB: ["user:bob"], OPS: ["*"]}))
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "heaprank", "mcp", "--state", f"sqlite:///{folder}/state.db",
         "--http", f"127.0.0.1:{port}", "--tokens", str(tokens), "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"heaprank mcp --http did not start: "
                                       f"{proc.communicate(timeout=5)[1].decode()}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert out == b""  # nothing on stdout over HTTP either


def _post(url: str, token: str | None, message: dict = INITIALIZE,
          session: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """A raw POST of ``message`` (``initialize``), with ``Authorization: Bearer token`` if
    given."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if session is not None:
        headers["Mcp-Session-Id"] = session
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _as(url: str, token: str, script):
    """Run ``script(client)`` in a session of the SDK's streamable-HTTP client with ``token``."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def main():
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await script(client)

    return asyncio.run(main())


async def _call(client, tool, args):
    result = await client.call_tool(tool, args)
    return result.content[0].text if result.is_error else result.structured_content


def test_no_token_or_a_wrong_one_is_401_and_a_valid_one_is_200(url):
    for token in (None, "not-a-token-of-this-server"):
        status, headers, body = _post(url, token)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        assert json.loads(body)["error"] == "invalid_token"
    status, headers, body = _post(url, MAYA)
    assert status == 200 and "mcp-session-id" in headers
    assert b'"serverInfo":{"name":"heaprank"' in body
    # the session is maya's: another valid token presenting its id finds no such session
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert _post(url, BOB, ping, headers["mcp-session-id"])[0] == 404


def test_a_token_works_in_its_namespace_and_is_refused_any_other(url):
    async def script(client):
        own = await _call(client, "rerank", {"query": "flight?", "candidates": candidates()})
        other = await _call(client, "rerank", {"query": "flight?", "candidates": candidates(),
                                               "namespace": "user:bob"})
        links = await _call(client, "links", {"namespace": "user:bob"})
        stats = await _call(client, "stats", {})
        return own, other, links, stats

    own, other, links, stats = _as(url, MAYA, script)
    assert own["namespace"] == "user:maya" and own["results"]
    for message in (other, links):
        assert message.endswith("namespace: not one of the namespaces this token may name")
    assert stats["counts"] is None and stats["weights_fitted"] is None and stats["weights"]


def test_another_tenant_s_recall_looks_like_one_never_recorded(url):
    secret = [{**c, "metadata": {**c["metadata"], "source": "bob-private-diary"}}
              for c in candidates()]

    async def bob(client):
        out = await _call(client, "rerank", {"query": "flight?", "candidates": secret, "k": 2})
        await _call(client, "feedback", {"recall_id": out["recall_id"], "used": ["m1"]})
        return out["recall_id"], await _call(client, "links", {})

    recall, own = _as(url, BOB, bob)
    assert "source:bob-private-diary" in json.dumps(own)  # bob's own view names it
    fake = new_recall_id()  # well formed, never recorded

    async def maya(client):
        answers = []
        for rid in (recall, fake):
            answers.append(await _call(client, "feedback", {"recall_id": rid, "used": ["m1"]}))
        for rid in (recall, fake):
            answers.append(await _call(client, "why_not", {"recall_id": rid, "id": "m5"}))
        return [*answers, await _call(client, "links", {"namespace": "*"})]

    fed, fed_fake, why, why_fake, pooled = _as(url, MAYA, maya)
    assert fed == fed_fake.replace(fake, recall) and "unknown" in fed
    assert why == why_fake.replace(fake, recall)
    assert "bob-private-diary" not in json.dumps(pooled) and pooled["total"] > 0


def test_an_operator_token_names_any_namespace_and_sees_the_counts(url):
    async def script(client):
        out = await _call(client, "rerank", {"query": "flight?", "candidates": candidates(),
                                             "namespace": "user:carol"})
        return out, await _call(client, "stats", {})

    out, stats = _as(url, OPS, script)
    assert out["namespace"] == "user:carol" and stats["counts"]["namespaces"] >= 1
