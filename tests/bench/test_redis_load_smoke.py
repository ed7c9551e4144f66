"""Smoke test of ``python -m benchmarks redis-load``: 20 namespaces in each mode on servers it
starts; checks the table, the JSON and that every restart brought the state back. No timing
assertions."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.state import redis_load
from tests.integration.redis_servers import have_binaries, unavailable

pytestmark = pytest.mark.bench


def test_redis_load_benchmark_restarts_each_mode_with_the_data(tmp_path, capsys):
    pytest.importorskip("redis")
    if not have_binaries():
        unavailable("redis-server / redis-cli are not installed")
    parser = argparse.ArgumentParser(prog="python -m benchmarks redis-load")
    redis_load.add_arguments(parser)
    out = tmp_path / "load.json"
    assert redis_load.run(parser.parse_args(["--namespaces", "20", "--json", str(out)])) == 0
    text = capsys.readouterr().out
    assert "1M namespaces (linear)" in text and "extrapolation, not a measurement" in text
    rows = json.loads(out.read_text())["rows"]
    assert [r["mode"] for r in rows] == ["aof", "aof-rewritten", "rdb"]
    for row in rows:
        assert row["links"] == 20 * 100  # measure() also checked them after the restart
        assert row["file_bytes"] > 0 and row["used_memory"] > 0 and row["restart_s"] > 0
    # the history replays every command; the rewritten file is the state's size
    assert rows[0]["file_bytes"] > rows[1]["file_bytes"]
    assert abs(sum(rows[0]["aof_byte_shares"].values()) - 1) < 1e-9 and "SET l" in rows[0]["aof_byte_shares"]
