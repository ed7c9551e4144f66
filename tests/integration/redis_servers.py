"""Real Redis servers for the integration tests: the shared one named by ``HEAPRANK_REDIS_URL``,
and servers the tests start themselves (a 3-master Cluster, a single server with AOF).

Without a reachable server (or the ``redis-server`` binary) the Redis tests skip, naming why,
unless ``HEAPRANK_REQUIRE_REDIS=1``: then they fail.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

DEFAULT_URL = "redis://127.0.0.1:6379/15"


def redis_required() -> bool:
    return os.environ.get("HEAPRANK_REQUIRE_REDIS") == "1"


def unavailable(reason: str) -> None:
    """Skip (or fail, when Redis is required) with ``reason``."""
    if redis_required():
        pytest.fail(f"HEAPRANK_REQUIRE_REDIS=1 but {reason}")
    pytest.skip(reason)


def _bindable(port: int) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A free port whose cluster bus port (+10000) is free too (Redis needs port <= 55535)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 45_000)
        if _bindable(port) and _bindable(port + 10_000):
            return port
    raise RuntimeError("no free local port pair for a Redis server")


def unique_prefix() -> str:
    """A key prefix no other test run uses."""
    return f"hrtest-{uuid.uuid4().hex[:12]}"


def ping(port: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


class RedisServer:
    """A ``redis-server`` process this test session started, on a free port in its own folder."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self, timeout_s: float = 5.0) -> None:
        """Start the server and wait (up to ``timeout_s``) until it answers PONG: a server
        loading its AOF or RDB file answers LOADING until it has loaded it."""
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log"), *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not ping(self.port, timeout_s):
            self.stop()
            raise RuntimeError(f"redis-server on port {self.port} did not start: "
                               f"{(self.folder / 'redis.log').read_text()[-2000:]}")

    def stop(self, *, hard: bool = False) -> None:
        """Stop the server: SIGKILL with ``hard`` (nothing flushed), else SIGTERM."""
        if self.proc is None:
            return
        if hard:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def have_binaries() -> bool:
    return shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None


def redis_cli(port: int, *args: str) -> str:
    """The output of ``redis-cli -p port args...`` ("" when the node does not answer)."""
    done = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True,
                          timeout=5)
    return done.stdout


def start_cluster(folder: Path, masters: int = 3, replicas: int = 0) -> list[RedisServer]:
    """Start ``masters * (1 + replicas)`` cluster-enabled servers, join them with
    ``redis-cli --cluster create`` and wait until every node says ``cluster_state:ok`` and every
    replica's link to its master is up. The masters come first in the list."""
    nodes: list[RedisServer] = []
    try:
        for i in range(masters * (1 + replicas)):
            nodes.append(RedisServer(folder / f"node{i}", "--cluster-enabled", "yes",
                                     "--cluster-config-file", "nodes.conf",
                                     "--cluster-node-timeout", "2000", "--appendonly", "no"))
        create = ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes),
                  "--cluster-replicas", str(replicas), "--cluster-yes"]
        subprocess.run(create, check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready = all("cluster_state:ok" in redis_cli(n.port, "cluster", "info") for n in nodes)
            roles = [redis_cli(n.port, "info", "replication") for n in nodes]
            linked = all("master_link_status:up" in r for r in roles if "role:slave" in r)
            if ready and linked and sum("role:slave" in r for r in roles) == masters * replicas:
                masters_first = sorted(nodes, key=lambda n: "role:slave" in redis_cli(
                    n.port, "info", "replication"))
                return masters_first
            time.sleep(0.1)
        raise RuntimeError("the local Redis Cluster did not reach cluster_state:ok")
    except BaseException:
        for node in nodes:
            node.stop(hard=True)
        raise


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The shared server's URL (``HEAPRANK_REDIS_URL``), after a ping."""
    url = os.environ.get("HEAPRANK_REDIS_URL", DEFAULT_URL)
    try:
        import redis
    except ImportError:
        unavailable("the redis package is not installed (pip install 'heaprank[redis]')")
    try:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        client.ping()
        client.close()
    except redis.RedisError as exc:
        unavailable(f"no Redis server answers at {url} ({exc})")
    return url


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A 3-master Redis Cluster on free local ports, started for this session and stopped after."""
    if not have_binaries():
        unavailable("redis-server / redis-cli are not installed")
    try:
        import redis  # noqa: F401
    except ImportError:
        unavailable("the redis package is not installed (pip install 'heaprank[redis]')")
    nodes = start_cluster(tmp_path_factory.mktemp("redis-cluster"))
    try:
        yield f"redis+cluster://127.0.0.1:{nodes[0].port}"
    finally:
        for node in nodes:
            node.stop()


@pytest.fixture()
def aof_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of one test alone, every write fsynced to its append-only file (the test
    may stop and start it)."""
    if not have_binaries():
        unavailable("redis-server / redis-cli are not installed")
    server = RedisServer(tmp_path / "aof", "--appendonly", "yes", "--appendfsync", "always")
    yield server
    server.stop()
