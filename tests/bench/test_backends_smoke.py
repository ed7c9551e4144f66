"""Smoke test of ``python -m benchmarks backends``: memory and a Redis server it starts, one
client process, a few calls; checks the printed tables and the JSON. No timing assertions."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from benchmarks.state import backends
from tests.integration.redis_servers import have_binaries, unavailable

pytestmark = pytest.mark.bench


def test_backends_benchmark_prints_every_table(tmp_path, capsys):
    pytest.importorskip("redis")
    if not have_binaries():
        unavailable("redis-server / redis-cli are not installed")
    parser = argparse.ArgumentParser(prog="python -m benchmarks backends")
    backends.add_arguments(parser)
    out = tmp_path / "backends.json"
    args = parser.parse_args(["--calls", "8", "--backends", "memory,redis", "--procs", "1",
                              "--quick", "--capacity-namespaces", "200", "--json", str(out)])
    assert backends.run(args) == 0
    text = capsys.readouterr().out
    assert "Rerank (50 candidates" in text and "Round trips, redis" in text
    assert "bytes per link" in text and "impression:" in text
    assert "Capacity (issue 23 targets)" in text and "PASS" in text
    report = json.loads(out.read_text())
    assert [r["backend"] for r in report["rows"]] == ["memory", "redis"]
    assert all(r["feedbacks"] == r["reranks"] > 0 for r in report["rows"])
    trips = report["round_trips"]["redis"]
    assert trips["rerank"]["requests"] == 2  # the read, the impression
    # the used items' links (the EM credit's read), then the feedback script: the impression
    # is the one this reranker stored
    assert trips["feedback"]["requests"] == 2


def test_backends_benchmark_measures_postgres_in_a_schema_it_drops(tmp_path, capsys, postgres_url):
    import psycopg

    parser = argparse.ArgumentParser(prog="python -m benchmarks backends")
    backends.add_arguments(parser)
    out = tmp_path / "backends.json"
    args = parser.parse_args(["--calls", "8", "--backends", "postgres", "--procs", "1",
                              "--quick", "--postgres-url", postgres_url, "--json", str(out)])
    assert backends.run(args) == 0
    text = capsys.readouterr().out
    assert "Disk, postgres" in text and "bytes per link" in text
    report = json.loads(out.read_text())
    assert [r["backend"] for r in report["rows"]] == ["postgres"]
    assert all(r["feedbacks"] == r["reranks"] > 0 for r in report["rows"])
    sizes = report["postgres_sizes"]
    assert sizes["links"] > 0 and sizes["bytes_per_impression"] > 0
    with psycopg.connect(postgres_url) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                            (f"heaprank_bench{os.getpid()}",)).fetchone()[0]
    assert left == 0
