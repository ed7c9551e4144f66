"""What the learned state and the process keep: bytes per feedback, per link, per impression,
and whether caller texts stay in memory.

Run from the repository root (needs only heaprank itself)::

    python -m benchmarks footprint [--feedbacks 20000] [--out benchmarks/results/footprint.json]

1. **State growth per feedback**: a seeded assistant workload (32 namespaces x 2,000 memories,
   ids like ``user07/m01234``), each step one rerank of 50 candidates with ``k=10`` and a
   feedback using one shown item (1 used + 9 ignored). After a warm-up, the SQLite file (after
   a WAL checkpoint) and the memory backend (the size of every object it holds) are measured
   before and after ``--feedbacks`` more steps; bytes per feedback = growth / steps, split by
   table for SQLite (``dbstat``).
2. **Bytes per link**: the link-size measurement of the latency benchmark (1,000,000 links).
3. **Caller texts**: RSS of a fresh process before and after reranking 300 distinct 1 MB texts,
   and the rerank time of one candidate of 1 KB, 1 MB and 10 MB.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import REPO_ROOT, T0
from .linksize import measure_links

DAY = 86_400.0
K = 10
N_CANDIDATES = 50
KINDS = ("fact", "episode", "tool_result", "preference", "note")
SOURCES = ("user", "assistant")
WORDS = ("flight dentist lease rent passport dinner concert booked confirmed moved cheap late "
         "Monday Friday March May Lisbon Porto Anna Ben Maya $120 9:40 three people tomorrow "
         "the a to of we and it was is for on at").split()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--feedbacks", type=int, default=20_000, help="measured steps per backend")
    p.add_argument("--warmup", type=int, default=5_000, help="steps before measuring")
    p.add_argument("--namespaces", type=int, default=32)
    p.add_argument("--memories", type=int, default=2_000, help="memories per namespace")
    p.add_argument("--links", type=int, default=1_000_000, help="links for the per-link size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the JSON here too")


def _store(seed: int, namespaces: int, memories: int) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    out: dict[str, list[dict[str, Any]]] = {}
    for u in range(namespaces):
        ns = f"user{u:02d}"
        docs = []
        for m in range(memories):
            words = [rng.choice(WORDS) for _ in range(rng.randint(5, 25))]
            docs.append({"id": f"{ns}/m{m:05d}", "text": " ".join(words).capitalize(),
                         "metadata": {"kind": rng.choice(KINDS), "source": rng.choice(SOURCES),
                                      "created_at": T0 - rng.uniform(1, 90) * DAY}})
        out[ns] = docs
    return out


QUESTIONS = ("When is my {w}?", "How many people are coming to the {w}?", "Who booked the {w}?",
             "Where is the {w}?", "What did we say about the {w}?")


def _steps(rr: Any, store: dict[str, list[dict[str, Any]]], n: int, rng: random.Random) -> None:
    names = sorted(store)
    for _ in range(n):
        ns = rng.choice(names)
        picked = rng.sample(store[ns], N_CANDIDATES)
        cands = [{**d, "score": float(N_CANDIDATES - i)} for i, d in enumerate(picked)]
        question = rng.choice(QUESTIONS).format(w=rng.choice(WORDS[:10]))
        ranking = rr.rerank(question, cands, namespace=ns, k=K, now=T0)
        rr.feedback(ranking.recall_id, used=[ranking.ids[rng.randrange(K)]])


def _sqlite_bytes(path: str) -> tuple[int, dict[str, int]]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        by_table: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            by_table[name] = int(size)
    finally:
        conn.close()
    total = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    return total, by_table


def sqlite_growth(args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    from heaprank import Reranker, SQLiteState

    store = _store(args.seed, args.namespaces, args.memories)
    path = str(Path(tmp) / "footprint.db")
    rng = random.Random(args.seed + 1)
    with Reranker(SQLiteState(path, synchronous="OFF")) as rr:
        _steps(rr, store, args.warmup, rng)
    before, tables_before = _sqlite_bytes(path)
    with Reranker(SQLiteState(path, synchronous="OFF")) as rr:
        _steps(rr, store, args.feedbacks, rng)
        stats = rr.stats()
    after, tables_after = _sqlite_bytes(path)
    per_table = {t: (tables_after.get(t, 0) - tables_before.get(t, 0)) / args.feedbacks
                 for t in sorted(set(tables_after) | set(tables_before))}
    return {"backend": "sqlite", "bytes_per_feedback": (after - before) / args.feedbacks,
            "per_table": per_table, "file_bytes": after, "stats": stats}


def deep_size(root: object) -> int:
    """Bytes of every object reachable from ``root`` (each counted once): what a state holds,
    without the allocator's noise or the process's other caches."""
    import numpy as np

    seen: set[int] = set()
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or callable(obj):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, np.ndarray):
            continue  # getsizeof counts an owned buffer already
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, n) for n in obj.__slots__ if hasattr(obj, n))
        elif hasattr(obj, "__dict__"):
            stack.append(vars(obj))
    return total


def memory_child(argv: list[str]) -> dict[str, Any]:
    """In a fresh process: growth of a MemoryState's own objects over the measured steps."""
    from heaprank import MemoryState, Reranker

    args = argparse.Namespace(**json.loads(argv[0]))
    store = _store(args.seed, args.namespaces, args.memories)
    rng = random.Random(args.seed + 1)
    state = MemoryState()
    rr = Reranker(state)
    _steps(rr, store, args.warmup, rng)
    before = deep_size(state)
    _steps(rr, store, args.feedbacks, rng)
    after = deep_size(state)
    return {"backend": "memory", "bytes_per_feedback": (after - before) / args.feedbacks,
            "stats": rr.stats()}


def texts_child(argv: list[str]) -> dict[str, Any]:
    """In a fresh process: RSS before and after 300 distinct 1 MB texts; rerank time by size."""
    from heaprank import Reranker

    def rss() -> int:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    rr = Reranker()
    rng = random.Random(5)
    word_list = [w for w in WORDS if w.isalpha()]
    base = " ".join(rng.choice(word_list) for _ in range(200_000))[:1_000_000]
    gc.collect()
    before = rss()
    for i in range(300):
        text = f"{i} " + base  # distinct texts, each built, ranked and dropped
        rr.rerank("When is the flight?", [{"id": f"t{i}", "text": text, "score": 1.0},
                                          {"id": "x", "text": "short one", "score": 0.5}],
                  namespace="texts", k=2, now=T0, track=False)
        del text
    gc.collect()
    after = rss()
    timings = {}
    for label, size in (("1 KB", 1_000), ("1 MB", 1_000_000), ("10 MB", 10_000_000)):
        text = (base * (size // len(base) + 1))[:size]
        samples = []
        for j in range(5):
            cand = [{"id": f"s{j}", "text": f"{j}" + text, "score": 1.0}]  # built before timing
            t0 = time.perf_counter()
            rr.rerank("When?", cand, namespace="texts", k=1, now=T0, track=False)
            samples.append(time.perf_counter() - t0)
        timings[label] = sorted(samples)[2] * 1000
    return {"rss_before_mb": before / 2**20, "rss_after_mb": after / 2**20,
            "feature_cache_bytes": rr._space.cached_bytes, "rerank_ms_by_text_size": timings}


def _child(func: str, payload: dict[str, Any]) -> dict[str, Any]:
    code = (f"import json, sys; from benchmarks.state.footprint import {func}; "
            f"print(json.dumps({func}(sys.argv[1:])))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(payload)], capture_output=True,
                          text=True, check=False, cwd=REPO_ROOT)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> int:
    started = time.time()
    fields = ("feedbacks", "warmup", "namespaces", "memories", "seed")
    payload = {f: getattr(args, f) for f in fields}
    with tempfile.TemporaryDirectory(prefix="heaprank-footprint-") as tmp:
        sqlite = sqlite_growth(args, tmp)
        memory = _child("memory_child", payload)
        links = [measure_links(b, args.links, tmp) for b in ("memory", "sqlite")]
    texts = _child("texts_child", {})
    result = {"sqlite": sqlite, "memory": memory, "links": links, "texts": texts,
              "args": payload, "run_s": time.time() - started}
    print(render(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


def render(r: dict[str, Any]) -> str:
    a = r["args"]
    lines = [f"$ python -m benchmarks footprint --feedbacks {a['feedbacks']} --warmup {a['warmup']}",
             f"workload: {a['namespaces']} namespaces x {a['memories']} memories, rerank of "
             f"{N_CANDIDATES} candidates with k={K} + feedback (1 used, 9 ignored) per step; "
             f"{a['warmup']} warm-up steps, {a['feedbacks']} measured; run {r['run_s']:.0f} s", "",
             "State growth per feedback of 10 shown items (target <= 800 B; memory within 2x)",
             f"{'backend':<8}  {'bytes/feedback':>14}  measured by",
             f"{'sqlite':<8}  {r['sqlite']['bytes_per_feedback']:>14.0f}  file + WAL after checkpoint",
             f"{'memory':<8}  {r['memory']['bytes_per_feedback']:>14.0f}  size of the state's objects "
             f"(deep getsizeof)", "",
             "SQLite growth by table, bytes per feedback (dbstat)"]
    for table, size in r["sqlite"]["per_table"].items():
        if abs(size) >= 0.5:
            lines.append(f"  {table:<28} {size:>8.0f}")
    lines += ["", "Bytes per link (filled through apply_feedback, fresh process)",
              f"{'backend':<8}  {'links':>9}  {'bytes/link':>10}  measure"]
    for row in r["links"]:
        if row["backend"] == "memory":
            lines.append(f"{'memory':<8}  {row['links']:>9,}  {row['rss_bytes_per_link']:>10.1f}  RSS growth")
        else:
            lines.append(f"{'sqlite':<8}  {row['links']:>9,}  {row['file_bytes_per_link']:>10.1f}  file size")
    t = r["texts"]
    lines += ["", "Caller texts (fresh process)",
              f"RSS before / after reranking 300 distinct 1 MB texts: {t['rss_before_mb']:.0f} MB / "
              f"{t['rss_after_mb']:.0f} MB (feature cache {t['feature_cache_bytes']:,} B)",
              "rerank of one candidate by text size, median of 5, ms: " + ", ".join(
                  f"{k} {v:.2f}" for k, v in t["rerank_ms_by_text_size"].items())]
    return "\n".join(lines)
