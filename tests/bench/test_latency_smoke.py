"""Smoke test of ``python -m benchmarks latency``: runs ``--quick`` on a tiny store and checks the
JSON shape. No timing assertions: speed targets are judged by the benchmark itself."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.speed import latency

pytestmark = pytest.mark.bench

TIMING_KEYS = {"reps", "p50_ms", "p95_ms", "mean_ms", "min_ms"}


def run_quick(tmp_path, capsys, *extra: str) -> tuple[dict, dict]:
    pytest.importorskip("tqdm")
    parser = argparse.ArgumentParser(prog="python -m benchmarks latency")
    latency.add_arguments(parser)
    out = tmp_path / "latency.json"
    args = parser.parse_args(["--quick", "--json", "--no-progress", "--sizes", "10,50",
                              "--out", str(out), *extra])
    assert latency.run(args) == 0
    printed = json.loads(capsys.readouterr().out)
    return printed, json.loads(out.read_text())


def check_rerank_rows(result: dict, backends: set[str]) -> None:
    rows = result["rerank"]
    assert {r["backend"] for r in rows} == backends
    assert {r["n"] for r in rows} == {10, 50}
    assert {r["mode"] for r in rows} == {m for m, _, _ in latency.RERANK_MODES}
    for row in rows:
        assert TIMING_KEYS <= set(row)
        assert row["reps"] == latency.QUICK_REPS
        assert 0 < row["p50_ms"] <= row["p95_ms"]
        assert row["candidates"] <= row["n"]


def test_quick_without_heapdb(tmp_path, capsys):
    printed, saved = run_quick(tmp_path, capsys, "--no-heapdb", "--no-memory-size")
    assert printed == saved
    assert printed["benchmark"] == "latency"
    assert printed["settings"]["quick"] is True
    check_rerank_rows(printed, {"memory", "sqlite"})
    assert printed["reference_recall"] == []
    assert printed["side_by_side"] is None
    # without heapdb-memory: the targets measured on heaprank alone, none side by side
    assert [t["name"].split(",")[0] for t in printed["targets"]] == [
        "rerank 50 SQLite / memory (call by call)", "feedback memory", "feedback SQLite FULL",
        "feedback SQLite NORMAL", "feedback SQLite NORMAL"]  # quick sizes: no 1,000 row
    assert all(isinstance(t["met"], bool) and t["value"] > 0 for t in printed["targets"])
    # the SQLite / memory ratio is the one of the two backends timed call by call
    pair = printed["backends_side_by_side"]
    assert set(pair["rows"]) == {"memory rerank+explain", "sqlite rerank+explain"}
    assert all(r["reps"] == latency.QUICK["side_reps"] for r in pair["rows"].values())
    assert printed["targets"][0]["value"] == pytest.approx(
        pair["rows"]["sqlite rerank+explain"]["p50_ms"] / pair["rows"]["memory rerank+explain"]["p50_ms"])
    procs = {(r["synchronous"], r["processes"], r["group"]) for r in printed["feedback_processes"]}
    assert ("NORMAL", 4, 16) in procs
    assert all(r["feedbacks"] == r["processes"] * 40 for r in printed["feedback_processes"])
    systems = {(r["system"], r["backend"], r["durability"]) for r in printed["feedback"]}
    assert ("heaprank", "sqlite", "WAL, synchronous=FULL (default)") in systems
    assert all(r["per_s"] > 0 for r in printed["feedback"])


def test_quick_with_heapdb_memory(tmp_path, capsys):
    pytest.importorskip("heapdb_memory")
    result, _ = run_quick(tmp_path, capsys, "--backends", "memory")
    check_rerank_rows(result, {"memory"})
    assert result["backends_side_by_side"] is None  # one backend: no SQLite / memory pair
    assert [r["n"] for r in result["reference_recall"]] == [10, 50]
    side = result["side_by_side"]
    assert set(side["rows"]) == {"heapdb-memory recall+explain", "bm25 top-50 alone",
                                 "heaprank rerank+explain", "heaprank bm25 + rerank+explain"}
    assert all(set(r) == {"p50", "mean"} for r in side["ratios"].values())
    # the same two calls, each system warm (its calls in blocks) and each cold (caches evicted)
    conditions = side["cache_conditions"]
    assert [c["condition"].split()[0] for c in conditions] == ["warm", "cold"]
    for c in conditions:
        assert c["recall"]["reps"] == c["rerank"]["reps"] == latency.QUICK["side_reps"]
        assert c["ratio"]["p50"] == pytest.approx(c["recall"]["p50_ms"] / c["rerank"]["p50_ms"])
    assert result["targets"][0]["name"].startswith("rerank 50 + EXPLAIN (memory) vs heapdb")
    assert all(isinstance(t["met"], bool) for t in result["targets"])
    (memory,) = result["memory"]
    assert memory["backend"] == "memory"
    assert memory["links"] == latency.QUICK["links"]
    assert memory["rss_bytes_per_link"] > 0
    # the machine's memory latency at the start and the end, and the one-line summary of a run
    assert len(result["machine"]["memory_probe_ns"]) == 2
    assert all(ns > 0 for ns in result["machine"]["memory_probe_ns"])
    from benchmarks.__main__ import main

    assert main(["latency-runs", str(tmp_path / "latency.json")]) == 0
    header, line = capsys.readouterr().out.splitlines()
    assert header.startswith("run") and line.startswith("latency.json")
    assert line.endswith(f"{sum(t['met'] for t in result['targets'])} of {len(result['targets'])}")


def test_tables_render(tmp_path, capsys):
    result, _ = run_quick(tmp_path, capsys, "--no-heapdb", "--backends", "sqlite")
    from benchmarks.speed.latency_report import render

    text = render(result)
    assert "Rerank latency" in text and "Feedback" in text and "Memory per link" in text
    assert "file size" in text  # the SQLite measurement reports the file
