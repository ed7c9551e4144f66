"""``python -m benchmarks latency``: rerank latency, feedback throughput and memory per link.

Measures, in one run on one seeded synthetic store (:mod:`benchmarks.speed.workload`):

* rerank latency p50/p95/mean for 10, 50, 200 and 1000 candidates, with and without EXPLAIN
  (``explain()`` called on every returned result), on the memory and SQLite backends;
* heapdb-memory 0.1.0's ``recall`` on the same questions with the same candidate pool, and the
  side-by-side ratios at 50 candidates, call by call (the judged figure: every heaprank call
  follows a recall that evicted the CPU caches), then under two symmetric cache conditions:
  each system's calls back to back in blocks (both warm) and the caches evicted before every
  call of either (both cold);
* the memory and SQLite backends' rerank + EXPLAIN at 50 candidates, call by call (their ratio
  is a target: the per-size cells run one backend at a time, the memory one between
  heapdb-memory's recalls);
* feedback latency and feedbacks per second per backend, SQLite in its default durable mode
  (WAL, ``synchronous=FULL``), and heapdb-memory's feedback beside it (target: 5x);
* resident memory per million links (memory backend) and file bytes per link (SQLite), each
  filled in a fresh subprocess;
* SQLite feedback throughput with 1 and 4 processes writing one file, one feedback or 16 per
  transaction (:mod:`benchmarks.speed.feedback_procs`), each configuration in three rounds taken in
  turn, its median round reported (the rounds' figures beside it);
* the machine's memory latency at the start and at the end (a 64 MB pointer chase): on a shared
  host it changes from minute to minute, and the cold-cache figures with it.

Candidates are what a retriever returns: heapdb-memory's own BM25 index (``BM25Index`` over the
same texts, same terms) top ``n``, so both systems rank exactly the same candidates; when fewer
than ``n`` memories match, the list is filled up with the namespace's most recent non-matching
memories at score 0 (a "recent memories" second retriever). heaprank's rerank time excludes
candidate generation (it is given the candidates); heapdb-memory's recall includes its BM25
step, so the side-by-side block also times that BM25 step alone and heaprank with it.

Timings use ``time.perf_counter_ns``; warm-up calls are excluded; the modes being compared are
interleaved call by call so a noisy machine slows them alike. The stores built before timing
are moved out of the garbage collector's reach (``gc.freeze``), so a collection triggered by
one system does not scan the other's store (a harness artefact); objects made while timing are
collected as usual. The workload is deterministic (``--seed``); the timings are not.
Install with ``pip install -r benchmarks/requirements.txt``.

JSON keys: ``rerank`` (one row per backend x n x mode), ``reference_recall`` (heapdb-memory per
n, with its actual pool), ``side_by_side`` (rows and ratios at 50 candidates),
``backends_side_by_side`` (memory and SQLite at 50, call by call), ``feedback``, ``memory``,
``targets`` (ratio of medians against the issue's 10x / 5x), plus the machine,
software versions, commit and workload.

Run: ``python -m benchmarks latency [--json] [--quick] [--out FILE] [--seed N]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import T0, git, require
from ..state.linksize import measure_links
from .feedback_procs import PLAN
from .feedback_procs import measure as measure_processes
from .timing import (
    RERANK_MODES,
    K,
    Retriever,
    backends_side_by_side,
    heapdb_store,
    memory_probe,
    side_by_side,
    time_feedback,
    time_rerank,
    warm_heapdb,
    warm_heaprank,
)
from .workload import Workload, make_workload

__all__ = ["K", "RERANK_MODES", "add_arguments", "run"]

SIZES = (10, 50, 200, 1000)
SCHEMA = 1
FULL = {"namespaces": 16, "memories": 1500, "warm_feedbacks": 3000, "timed_questions": 64,
        "links": 1_000_000, "reps": {10: 600, 50: 600, 200: 300, 1000: 80}, "warmup": 10,
        "side_reps": 1000, "feedback_reps": 1500}
QUICK = {"namespaces": 2, "memories": 120, "warm_feedbacks": 20, "timed_questions": 6,
         "links": 5_000, "reps": {}, "warmup": 1, "side_reps": 4, "feedback_reps": 4}
QUICK_REPS = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true",
                        help="tiny store and few repetitions (smoke test; numbers meaningless)")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON result to FILE")
    parser.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="candidate counts, comma-separated (default 10,50,200,1000)")
    parser.add_argument("--backends", default="memory,sqlite",
                        help="heaprank backends to time (default memory,sqlite)")
    parser.add_argument("--reps", type=int, default=None,
                        help="repetitions per timed cell (default: by size, 80-600)")
    parser.add_argument("--namespaces", type=int, default=None, help="namespaces in the store")
    parser.add_argument("--memories", type=int, default=None, help="memories per namespace")
    parser.add_argument("--warm-feedbacks", type=int, default=None,
                        help="feedbacks given before timing, so learned links exist")
    parser.add_argument("--links", type=int, default=None,
                        help="links for the memory-per-link measurement (default 1,000,000)")
    parser.add_argument("--no-heapdb", action="store_true",
                        help="skip heapdb-memory (no side-by-side ratios)")
    parser.add_argument("--no-memory-size", action="store_true",
                        help="skip the memory-per-link measurement")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


# --------------------------------------------------------------------------- settings


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    base = dict(QUICK if args.quick else FULL)
    sizes = tuple(int(s) for s in str(args.sizes).split(",") if s.strip())
    if not sizes or min(sizes) < 1:
        raise SystemExit("--sizes: expected positive integers, e.g. 10,50,200,1000")
    backends = tuple(b.strip() for b in str(args.backends).split(",") if b.strip())
    unknown = set(backends) - {"memory", "sqlite"}
    if unknown:
        raise SystemExit(f"--backends: unknown {sorted(unknown)}; expected memory, sqlite")
    for name in ("namespaces", "memories", "warm_feedbacks", "links"):
        value = getattr(args, name)
        if value is not None:
            base[name] = value
    reps = {n: args.reps or base["reps"].get(n) or (QUICK_REPS if args.quick else
                                                  max(40, 400 * 50 // max(n, 50)))
            for n in sizes}
    if args.reps:
        base["side_reps"] = base["feedback_reps"] = args.reps
    base.update(sizes=sizes, backends=backends, reps=reps, seed=args.seed, quick=args.quick,
                heapdb=not args.no_heapdb, memory_size=not args.no_memory_size,
                progress=not args.no_progress)
    return base


def _progress(cfg: dict[str, Any], total: int, desc: str):  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=not cfg["progress"], file=sys.stderr,
                leave=False, dynamic_ncols=True)


# --------------------------------------------------------------------------- the run


def _timed_questions(retriever: Retriever, pool: Sequence[tuple[str, str, str]],
                     count: int) -> tuple[list[tuple[str, str, str]], dict[str, Any]]:
    """Distinct questions not used in the warm-up, preferring those with >= 50 BM25 hits (so
    heapdb-memory's 50-candidate pool is exactly the 50 heaprank is given)."""
    seen, full, short = set(), [], []
    for ns, q, qtype in pool:
        if (ns, q) in seen:
            continue
        seen.add((ns, q))
        hits = len(retriever.bm25(ns, q, 10**9))
        (full if hits >= 50 else short).append(((ns, q, qtype), hits))
    chosen = (full + short)[:count]
    hits = sorted(h for _, h in chosen)
    return [c for c, _ in chosen], {"min": hits[0], "median": hits[len(hits) // 2],
                                    "max": hits[-1], "with_50_or_more": sum(h >= 50 for h in hits)}


def _build(cfg: dict[str, Any], workload: Workload, retriever: Retriever,
           warm: Sequence[tuple[str, str, str]], tmp: str) -> tuple[dict[str, Any], Any, dict]:
    """The systems, each warmed with the same questions and simulated feedback."""
    from heaprank import Config, Refit, Reranker
    from heaprank.state import SQLiteState

    HOT = Config(refit=Refit(every=0))  # the hot paths: what a re-fit costs is refit-cost's

    systems: dict[str, Any] = {}
    timings: dict[str, float] = {}
    todo = len(cfg["backends"]) + (1 if cfg["heapdb"] else 0)
    with _progress(cfg, todo * len(warm), "warm-up feedback") as bar:
        if "memory" in cfg["backends"]:
            t0 = time.perf_counter()
            rr = Reranker(config=HOT)
            warm_heaprank(rr, retriever, warm, cfg["seed"], bar)
            systems["heaprank memory"] = (rr, "memory", "in-process")
            timings["heaprank memory"] = time.perf_counter() - t0
        if "sqlite" in cfg["backends"]:
            path = str(Path(tmp) / "state.db")
            t0 = time.perf_counter()
            with Reranker(SQLiteState(path, synchronous="OFF"), config=HOT) as fast:  # same result, faster
                warm_heaprank(fast, retriever, warm, cfg["seed"], bar)
            timings["heaprank sqlite (synchronous=OFF for the warm-up only)"] = (
                time.perf_counter() - t0)
            systems["heaprank sqlite FULL"] = (Reranker(f"sqlite:///{path}", config=HOT), "sqlite",
                                               "WAL, synchronous=FULL (default)")
            systems["heaprank sqlite NORMAL"] = (Reranker(SQLiteState(path, synchronous="NORMAL"),
                                                          config=HOT),
                                                 "sqlite", "WAL, synchronous=NORMAL")
        mem = None
        if cfg["heapdb"]:
            t0 = time.perf_counter()
            mem = heapdb_store(workload)
            timings["heapdb-memory add"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            warm_heapdb(mem, warm, cfg["seed"], bar)
            timings["heapdb-memory"] = time.perf_counter() - t0
    return systems, mem, timings


def _environment() -> dict[str, Any]:
    import numpy

    from heaprank import __version__
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                       cpu)
    except OSError:
        pass
    try:
        from importlib.metadata import version
        heapdb_memory = version("heapdb-memory")
    except Exception:  # noqa: BLE001 - not installed
        heapdb_memory = None
    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(),
                    "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
        "software": {"heaprank": __version__, "numpy": numpy.__version__,
                     "heapdb-memory": heapdb_memory, "sqlite": __import__("sqlite3").sqlite_version,
                     "commit": commit + ("+dirty" if dirty and commit else "")},
    }


def _targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The speed targets (issue 7): ratios of medians measured side by side in this run, and
    throughputs measured in this run."""
    out: list[dict[str, Any]] = []

    def add(name: str, wanted: str, value: float, met: bool) -> None:
        out.append({"name": name, "wanted": wanted, "value": value, "met": met})

    side = result.get("side_by_side")
    if side is not None:
        r = side["ratios"]["recall / heaprank rerank+explain"]["p50"]
        add("rerank 50 + EXPLAIN (memory) vs heapdb-memory recall+explain, x faster", ">= 5",
            r, r >= 5.0)
    p50 = {(row["backend"], row["n"], row["mode"]): row["p50_ms"] for row in result["rerank"]}
    if ("memory", 50, "rerank+explain") in p50 and ("memory", 1000, "rerank+explain") in p50:
        ratio = p50[("memory", 1000, "rerank+explain")] / p50[("memory", 50, "rerank+explain")]
        add("rerank 1,000 / rerank 50 (memory, EXPLAIN, k=10), time ratio", "<= 10", ratio,
            ratio <= 10.0)
    backends = result.get("backends_side_by_side")
    if backends is not None:
        ratio = backends["ratio"]["p50"]
        add("rerank 50 SQLite / memory (call by call), time ratio", "<= 1.5", ratio,
            ratio <= 1.5)
    by = {(row["system"], row["backend"], row["durability"]): row for row in result["feedback"]}
    mine = by.get(("heaprank", "memory", "in-process"))
    if mine is not None:
        rate = 1000.0 / mine["p50_ms"]
        add("feedback memory, per s (of p50)", ">= 15,000", rate, rate >= 15_000)
    wanted = {("FULL", 1, 1): 1_200, ("NORMAL", 1, 1): 2_000, ("NORMAL", 4, 16): 3_000}
    for row in result.get("feedback_processes", []):
        key = (row["synchronous"], row["processes"], row["group"])
        if key in wanted:
            add(f"feedback SQLite {key[0]}, {key[1]} process(es), {key[2]} per commit, per s",
                f">= {wanted[key]:,}", row["per_s"], row["per_s"] >= wanted[key])
    return out


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; print tables (or JSON with ``--json``); 0 on success."""
    cfg = _settings(args)
    require("tqdm", feature="python -m benchmarks latency")
    if cfg["heapdb"]:
        require("heapdb_memory",
                feature="python -m benchmarks latency (heapdb-memory side by side; --no-heapdb skips it)")
    started = time.time()
    result: dict[str, Any] = {
        "benchmark": "latency", "schema": SCHEMA,
        "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        **_environment()}
    result["machine"]["memory_probe_ns"] = [memory_probe()]
    n_questions = cfg["warm_feedbacks"] + 8 * cfg["timed_questions"]
    workload = make_workload(cfg["seed"], cfg["namespaces"], cfg["memories"], n_questions)
    retriever = Retriever(workload)
    warm = workload.questions[:cfg["warm_feedbacks"]]
    timed, hits = _timed_questions(retriever, workload.questions[cfg["warm_feedbacks"]:],
                                   cfg["timed_questions"])
    result["workload"] = {**workload.describe(), "warm_feedbacks": len(warm),
                          "timed_questions": len(timed), "bm25_hits_of_timed": hits,
                          "now": T0, "k": K, "track": True,
                          "gc": "stores frozen out of the collector before timing (gc.freeze)"}
    result["settings"] = {key: cfg[key] for key in ("seed", "quick", "sizes", "backends",
                                                      "warmup", "side_reps", "feedback_reps",
                                                      "links")}
    result["settings"]["reps"] = {str(n): r for n, r in cfg["reps"].items()}
    with tempfile.TemporaryDirectory(prefix="heaprank-bench-") as tmp:
        systems, mem, result["warmup_s"] = _build(cfg, workload, retriever, warm, tmp)
        gc.collect()
        gc.freeze()
        try:
            _measure(cfg, result, systems, mem, retriever, timed)
        finally:
            gc.unfreeze()
        for rr, _, _ in systems.values():
            rr.close()
        result["memory"] = []
        if cfg["memory_size"]:
            with _progress(cfg, len(cfg["backends"]), "memory per link") as bar:
                for backend in cfg["backends"]:
                    result["memory"].append(measure_links(backend, cfg["links"], tmp))
                    bar.update(1)
    result["targets"] = _targets(result)
    result["machine"]["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    result["machine"]["memory_probe_ns"].append(memory_probe())
    result["duration_s"] = time.time() - started
    _emit(args, result)
    return 0


def _measure(cfg: dict[str, Any], result: dict[str, Any], systems: dict[str, Any], mem: Any,
             retriever: Retriever, timed: Sequence[tuple[str, str, str]]) -> None:
    rerank_systems = {"memory": "heaprank memory", "sqlite": "heaprank sqlite FULL"}
    total = sum(cfg["reps"].values()) + cfg["warmup"] * len(cfg["sizes"])
    result["rerank"], result["reference_recall"] = [], []
    for backend in cfg["backends"]:
        rr = systems[rerank_systems[backend]][0]
        with _progress(cfg, total, f"rerank {backend}") as bar:
            rows, ref = time_rerank(rr, backend, retriever, timed, cfg,
                                    mem if backend == "memory" else None, bar)
        result["rerank"] += rows
        result["reference_recall"] += ref
    result["side_by_side"] = None
    if mem is not None and "memory" in cfg["backends"]:
        with _progress(cfg, cfg["side_reps"] + cfg["warmup"], "side by side") as bar:
            result["side_by_side"] = side_by_side(systems["heaprank memory"][0], mem, retriever,
                                                  timed, cfg, bar)
    result["backends_side_by_side"] = None
    if "memory" in cfg["backends"] and "sqlite" in cfg["backends"]:
        with _progress(cfg, cfg["side_reps"] + cfg["warmup"], "memory vs sqlite") as bar:
            result["backends_side_by_side"] = backends_side_by_side(
                systems["heaprank memory"][0], systems[rerank_systems["sqlite"]][0], retriever,
                timed, cfg, bar)
    with _progress(cfg, cfg["feedback_reps"] + cfg["warmup"], "feedback") as bar:
        result["feedback"] = time_feedback(systems, mem, retriever, timed, cfg, bar)
    result["feedback_processes"] = []
    if "sqlite" in cfg["backends"]:
        per = 40 if cfg["quick"] else 600
        # One window of a second or less is at the mercy of the shared host's disk and memory
        # (FULL, one process: 1.1k to 1.8k/s from one window to the next): each configuration
        # runs in several rounds, one after the other in turn, and reports its median round.
        rounds = 1 if cfg["quick"] else 3
        runs: dict[tuple[str, int, int], list[dict[str, Any]]] = {key: [] for key in PLAN}
        with tempfile.TemporaryDirectory(prefix="heaprank-procs-") as tmp, \
                _progress(cfg, rounds * len(PLAN), "feedback processes") as bar:
            for _ in range(rounds):
                for sync, procs, group in PLAN:
                    runs[(sync, procs, group)].append(measure_processes(tmp, sync, procs, per,
                                                                        group))
                    bar.update(1)
        for key in PLAN:
            ordered = sorted(runs[key], key=lambda r: r["per_s"])
            median = dict(ordered[len(ordered) // 2])
            median["rounds_per_s"] = [r["per_s"] for r in runs[key]]
            result["feedback_processes"].append(median)


def _emit(args: argparse.Namespace, result: dict[str, Any]) -> None:
    from .latency_report import render

    text = json.dumps(result, indent=2, sort_keys=False)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text if args.json else render(result))
