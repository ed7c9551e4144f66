"""A PostgreSQL server a test starts itself (``initdb`` into a temporary folder, a free local
port), to stop and start again: what the shared server of ``HEAPRANK_POSTGRES_URL`` must never
be put through.

The binaries are looked up in ``HEAPRANK_POSTGRES_BIN``, then ``/usr/lib/postgresql/<newest>/bin``,
then ``PATH``. As root (which ``initdb`` refuses) the server runs as the ``postgres`` OS user
through ``runuser``. Without the binaries (or that user) the test skips, naming why, unless
``HEAPRANK_REQUIRE_POSTGRES=1``: then it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.postgres_server import unavailable


def _bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (None: not installed)."""
    named = os.environ.get("HEAPRANK_POSTGRES_BIN")
    candidates = [Path(named)] if named else []
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                      key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    candidates += reversed(versions)
    found = shutil.which("pg_ctl")
    candidates += [Path(found).parent] if found else []
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """A PostgreSQL server of one test: its cluster in ``folder``, on a free local port (kept
    across a stop and a start), superuser ``postgres`` with trust authentication."""

    def __init__(self, bin_dir: Path, folder: Path, runner: list[str]) -> None:
        self.bin_dir, self.folder, self.runner = bin_dir, folder, runner
        self.data = folder / "data"
        self.port = _free_port()
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self.runner, str(self.bin_dir / tool), *args],
                              capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            log = self.folder / "server.log"
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stderr[-1500:]}"
                               + (log.read_text()[-1500:] if log.exists() else ""))

    def start(self) -> None:
        """Start the server (after a crash: it recovers from its WAL first) and wait until it
        accepts connections."""
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} "
                   f"-c fsync=off -c max_connections=20")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"),
                  "-o", options, "-w", "-t", "30", "start")

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server: ``immediate`` ends every process at once, as a crash does (no
        checkpoint; a start recovers), ``fast`` shuts it down cleanly."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture()
def private_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test alone (it may stop and start it), removed afterwards."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        unavailable("no PostgreSQL server binaries (initdb, pg_ctl) found; set "
                    "HEAPRANK_POSTGRES_BIN to their folder")
    runner: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="heaprank-pg-"))
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres OS user
        try:
            import pwd

            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder)
            unavailable("running as root, and there is no 'postgres' OS user to run a server as")
        os.chown(folder, user.pw_uid, user.pw_gid)
        runner = ["runuser", "-u", "postgres", "--"]
    server = None
    try:
        server = PostgresServer(bin_dir, folder, runner)
        yield server
    finally:
        if server is not None:
            try:
                server.stop()
            except RuntimeError:
                pass  # stopped already
        shutil.rmtree(folder, ignore_errors=True)
