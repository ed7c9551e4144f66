"""Redis URLs and start-up, against the real server (``HEAPRANK_REDIS_URL``):

* a database number that is not an integer (``/abc``, ``/8x``) is refused, naming the URL part
  (redis-py would silently use db 0);
* the CLI's read-only commands never create a state (no ``P:meta`` written): on a prefix that
  holds none they report "no heaprank state at ..." and exit 2;
* an unknown redis-py option, or ``redis+cluster://`` against a server that is not a Cluster,
  ends the CLI with one ``heaprank: ...`` line and exit 2, not a traceback;
* a server down at start-up does not keep a worker from starting: a non-strict Reranker is
  built, ranks untracked and flagged, and tracks again once the server is up; ``strict=True``
  raises StateUnavailableError at construction."""

from __future__ import annotations

import json
import socket
from contextlib import closing
from urllib.parse import urlsplit, urlunsplit

import pytest

from heaprank import Reranker, StateUnavailableError
from heaprank.app.cli import main
from heaprank.errors import ConfigError
from heaprank.state import open_state
from tests.integration.redis_servers import unique_prefix

CANDIDATES = [{"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 2.0},
              {"id": "chat", "text": "ok", "score": 1.0}]


def _with_path(url: str, path: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=path, query=""))


def _keys(redis_url: str, prefix: str) -> list[bytes]:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return list(client.scan_iter(match=f"{prefix}:*"))
    finally:
        client.close()


def _dead_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: nothing listens there


@pytest.mark.parametrize("path", ["/abc", "/8x", "/-1", "/1.5", "/15/x"])
def test_a_database_number_that_is_not_an_integer_is_refused(redis_url, path, capsys):
    url = _with_path(redis_url, path)
    with pytest.raises(ConfigError, match=r"database .* in the URL path"):
        open_state(url)
    from heaprank.state.redis import RedisState

    with pytest.raises(ConfigError, match=r"database"):
        RedisState(url, prefix=unique_prefix())
    assert main(["stats", "--state", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("heaprank: ") and err.count("\n") == 1 and path[1:] in err


def test_a_valid_database_number_is_used(redis_url):
    prefix = unique_prefix()
    state = open_state(_with_path(redis_url, "/15") + f"?prefix={prefix}")
    try:
        assert state.stats()["namespaces"] == 0
    finally:
        state.clear()  # type: ignore[attr-defined]
        state.close()


def test_read_only_commands_never_create_a_state(redis_url, tmp_path, capsys):
    prefix = unique_prefix()
    url = f"{redis_url}{'&' if '?' in redis_url else '?'}prefix={prefix}"
    candidates = tmp_path / "c.json"
    candidates.write_text(json.dumps(CANDIDATES))
    commands = [["links"], ["stats"], ["replay"], ["tune"],
                ["explain", "--query", "When?", "--candidates", str(candidates)]]
    for command in commands:
        assert main([*command, "--state", url]) == 2, command
        err = capsys.readouterr().err
        assert err.startswith("heaprank: no heaprank state at ") and err.count("\n") == 1
        assert _keys(redis_url, prefix) == [], command  # nothing written, not even P:meta
    # A state that exists is read as it is, and still nothing is written by reading it.
    rr = Reranker(url)
    ranking = rr.rerank("When is my flight?", CANDIDATES, namespace="maya")
    rr.feedback(ranking.recall_id, used=["lisbon"])
    before = sorted(_keys(redis_url, prefix))
    try:
        for command in commands:
            assert main([*command, "--state", url]) == 0, command
        capsys.readouterr()
        assert sorted(_keys(redis_url, prefix)) == before
    finally:
        rr.state.clear()  # type: ignore[attr-defined]
        rr.close()


@pytest.mark.parametrize("make_url", [
    lambda url: f"{url}{'&' if '?' in url else '?'}bogus=1",
    lambda url: "redis+cluster://" + urlsplit(url).netloc,
])
def test_a_bad_option_or_a_cluster_url_on_a_plain_server_is_one_line(redis_url, make_url,
                                                                       capsys):
    url = make_url(redis_url)
    for command in (["stats"], ["links"]):
        assert main([*command, "--state", url]) == 2
        err = capsys.readouterr().err
        assert err.startswith("heaprank: ") and err.count("\n") == 1
        assert "Traceback" not in err
    with pytest.raises((ConfigError, StateUnavailableError)):
        open_state(url)


def test_a_server_down_at_start_up_does_not_keep_a_worker_from_starting(caplog):
    url = f"redis://127.0.0.1:{_dead_port()}/0?timeout=0.2"
    from heaprank.state.redis import RedisState

    state = RedisState(url.split("?")[0], timeout_s=0.2, retries=0)
    rr = Reranker(url)
    ranking = rr.rerank("When is my flight?", CANDIDATES, namespace="maya")
    assert ranking.ids  # ranked, untracked, and flagged
    assert all("state unavailable" in item.explain() for item in ranking.items)
    with pytest.raises(StateUnavailableError):
        rr.feedback(ranking.recall_id, used=["lisbon"])
    with pytest.raises(StateUnavailableError):
        state.stats()
    with pytest.raises(StateUnavailableError):
        Reranker(url, strict=True)
    rr.close()
    state.close()


def test_a_worker_started_during_an_outage_tracks_once_the_server_is_up(aof_server):
    aof_server.stop(hard=True)
    prefix = unique_prefix()
    rr = Reranker(f"{aof_server.url}?prefix={prefix}&timeout=0.3")
    down = rr.rerank("When is my flight?", CANDIDATES, namespace="maya")
    assert all("state unavailable" in item.explain() for item in down.items)
    aof_server.start()
    up = rr.rerank("When is my flight?", CANDIDATES, namespace="maya")
    assert not any("state unavailable" in item.explain() for item in up.items)
    assert rr.feedback(up.recall_id, used=["lisbon"]).applied
    assert rr.stats()["feedbacks"] == 1
    rr.close()
