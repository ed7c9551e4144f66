"""Aligned text tables for ``python -m benchmarks latency`` (the JSON holds the same numbers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned text columns, right-aligned numbers."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_num(row[i]) for row in rows) if rows else False
               for i in range(len(headers))]
    lines = []
    for j, row in enumerate(cells):
        parts = [c.rjust(w) if numeric[i] else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(parts).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value >= 1000:
            return f"{value:,.0f}"
        if value >= 100:
            return f"{value:.1f}"
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _header(result: dict[str, Any]) -> str:
    m, s, w = result["machine"], result["software"], result["workload"]
    return "\n".join([
        f"$ {result['command']}",
        f"date {result['started_utc']}  commit {s['commit'] or '?'}  heaprank {s['heaprank']}  "
        f"heapdb-memory {s['heapdb-memory']}  sqlite {s['sqlite']}  python {m['python']}",
        f"machine {m['cpu']}, {m['cores']} cores, load {m['loadavg_start']} -> "
        f"{m.get('loadavg_end')}" + (
            "" if not m.get("memory_probe_ns") else ", memory " + " -> ".join(
                f"{ns:.0f}" for ns in m["memory_probe_ns"]) + " ns per dependent read (64 MB "
            "pointer chase)"),
        f"store: {w['namespaces']} namespaces x {w['memories'] // max(w['namespaces'], 1)} "
        f"memories (words/memory min {w['words_per_memory']['min']}, median "
        f"{w['words_per_memory']['median']}, max {w['words_per_memory']['max']}), "
        f"{w['warm_feedbacks']} warm-up feedbacks, {w['timed_questions']} timed questions "
        f"(BM25 hits median {w['bm25_hits_of_timed']['median']}), seed {w['seed']}",
        f"run time {result['duration_s']:.0f} s",
    ])


def _rerank_table(result: dict[str, Any]) -> str:
    rows = [(r["backend"], r["n"], r["mode"], r["k"], r["reps"], r["p50_ms"], r["p95_ms"],
             r["mean_ms"]) for r in result["rerank"]]
    rows += [("heapdb-memory", r["n"], f"recall+explain (pool {r['pool_mean']:.0f})", r["k"],
              r["reps"], r["p50_ms"], r["p95_ms"], r["mean_ms"])
             for r in result["reference_recall"]]
    return ("Rerank latency, ms (EXPLAIN = explain() on every returned result; "
            "impressions tracked)\n"
            + table(["backend", "n", "mode", "k", "reps", "p50", "p95", "mean"], rows))


def _side_table(side: dict[str, Any]) -> str:
    rows = [(name, r["reps"], r["p50_ms"], r["p95_ms"], r["mean_ms"])
            for name, r in side["rows"].items()]
    ratios = [(name, r["p50"], r["mean"]) for name, r in side["ratios"].items()]
    return (f"Side by side: {side['n']} candidates, k={side['k']}, EXPLAIN, memory backend, "
            f"{side['questions']} questions (same candidates: "
            f"{'yes' if side['same_candidates'] else 'no'}), ms\n"
            + table(["what", "reps", "p50", "p95", "mean"], rows) + "\n\n"
            + table(["ratio (x faster)", "of p50", "of mean"], ratios)
            + _conditions_table(side))


def _conditions_table(side: dict[str, Any]) -> str:
    rows = [(c["condition"], c["reps"], c["recall"]["p50_ms"], c["rerank"]["p50_ms"],
             c["ratio"]["p50"], c["ratio"]["mean"]) for c in side.get("cache_conditions", [])]
    if not rows:
        return ""
    return ("\n\nThe same two calls under symmetric cache conditions (above, call by call, each "
            "rerank follows a recall that evicted its caches), p50 ms\n"
            + table(["condition", "reps", "heapdb recall", "heaprank rerank", "x faster (p50)",
                     "(mean)"], rows))


def _backends_table(pair: dict[str, Any]) -> str:
    rows = [(name, r["reps"], r["p50_ms"], r["p95_ms"], r["mean_ms"])
            for name, r in pair["rows"].items()]
    rows.append(("ratio sqlite / memory", "", pair["ratio"]["p50"], "", pair["ratio"]["mean"]))
    return (f"Memory and SQLite backends call by call: {pair['n']} candidates, k={pair['k']}, "
            f"EXPLAIN, {pair['questions']} questions, ms\n"
            + table(["what", "reps", "p50", "p95", "mean"], rows))


def _feedback_table(result: dict[str, Any]) -> str:
    rows = [(r["system"], r["backend"], r["durability"], r["reps"], r["p50_ms"], r["p95_ms"],
             r["mean_ms"], r["per_s"]) for r in result["feedback"]]
    return ("Feedback (1 used + 9 ignored of 10 shown; the rerank before it is not timed), ms\n"
            + table(["system", "backend", "durability", "reps", "p50", "p95", "mean",
                     "feedbacks/s"], rows))


def _memory_table(result: dict[str, Any]) -> str:
    rows = []
    for r in result["memory"]:
        per_link = r.get("file_bytes_per_link", r["rss_bytes_per_link"])
        what = "file size" if "file_bytes" in r else "RSS growth"
        rows.append((r["backend"], what, r["links"], r["global_links"], r["namespaces"],
                     r.get("file_bytes", r["rss_growth_bytes"]) / 2**20, per_link,
                     per_link * 1e6 / 2**20, r["fill_s"]))
    return ("Memory per link (filled through apply_feedback in a fresh process)\n"
            + table(["backend", "measure", "links", "global", "namespaces", "MiB",
                     "bytes/link", "MiB per 1M links", "fill s"], rows))


def _targets_table(result: dict[str, Any]) -> str:
    rows = [(t["name"], t["wanted"], t["value"], "MET" if t["met"] else "MISSED")
            for t in result["targets"]]
    return ("Targets (ratios of medians measured side by side in this run)\n"
            + table(["target", "wanted", "measured", "verdict"], rows))


def _processes_table(result: dict[str, Any]) -> str:
    rows = [(r["synchronous"], r["processes"], r["group"], r["feedbacks"], r["wall_s"], r["per_s"],
             " ".join(f"{x:,.0f}" for x in r.get("rounds_per_s", [r["per_s"]])))
            for r in result["feedback_processes"]]
    return ("Feedback throughput, SQLite, processes writing one file at once (group = feedbacks "
            "per transaction, Reranker.feedback_many; the median of the rounds, in turn)\n"
            + table(["synchronous", "processes", "group", "feedbacks", "wall s", "feedbacks/s",
                     "rounds"], rows))


def render(result: dict[str, Any]) -> str:
    parts = [_header(result), _rerank_table(result)]
    if result.get("side_by_side"):
        parts.append(_side_table(result["side_by_side"]))
    if result.get("backends_side_by_side"):
        parts.append(_backends_table(result["backends_side_by_side"]))
    parts.append(_feedback_table(result))
    if result.get("memory"):
        parts.append(_memory_table(result))
    if result.get("feedback_processes"):
        parts.append(_processes_table(result))
    if result.get("targets"):
        parts.append(_targets_table(result))
    return "\n\n".join(parts)
