"""Each kept C kernel's share of a rerank of 50 candidates with EXPLAIN and of a memory feedback.

Run (from the repository root, heaprank installed with its C kernels)::

    python -m benchmarks kernel-shares [--calls 1500] [--questions 64] [--warm 3000]

The latency benchmark's workload (:mod:`benchmarks.speed.workload`: 16 namespaces x 1,500 memories,
3,000 warm-up feedbacks, 64 timed questions, BM25 top 50, k = 10) and its calls
(:mod:`benchmarks.speed.timing`): one memory-backed ``Reranker`` per system, every kernel on
or one of them off (its stage then runs the Python twin), each warmed on the same feedbacks.
The kernels are the two kept at the candidates / features boundary (issue 31): every other
stage is Python only.
The systems are timed call by call in turn (``interleave``, thread CPU time, so a noisy host
slows them alike), first ``rerank`` + ``explain()`` of every result, then ``feedback`` on a
fresh rerank (the rerank before it is not timed). A kernel is switched off by setting its
stage's module attribute to None while its system's call runs (outside the timed region).

Per system it prints the p50 in microseconds, and per kernel off: ``x slower`` (off / on) and
``share`` (off - on) / off, the part of the time without the kernel that the kernel takes
away.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

#: Per kept kernel, the module attributes that hold it (set to None to turn it off).
KERNELS: dict[str, tuple[tuple[str, str], ...]] = {
    "coerce_columns": (("heaprank.scoring.candidates", "_KERNEL"),),
    "shape_rows": (("heaprank.scoring.space", "shape_rows_kernel"),),
}
ON = "(every kernel on)"


class Switches:
    """Sets every kernel's attributes for one system: its own off, the others as built."""

    def __init__(self) -> None:
        self.built = {(module, name): getattr(importlib.import_module(module), name)
                      for pairs in KERNELS.values() for module, name in pairs}
        missing = [f"{m}.{n}" for (m, n), kernel in self.built.items() if kernel is None]
        if missing:
            raise SystemExit(f"kernels not built (or HEAPRANK_PURE_PYTHON set): {missing}")

    def set(self, off: str | None) -> None:
        gone = set(KERNELS.get(off, ())) if off is not None else set()
        for (module, name), kernel in self.built.items():
            setattr(sys.modules[module], name, None if (module, name) in gone else kernel)


def _switched(switches: Switches, off: str | None,
              call: Callable[[int], Any]) -> Callable[[int], Callable[[], Any]]:
    """``call`` with ``off``'s kernel off: switched outside the timed region, which is the
    returned callable (its own setup, if it returns one, is done before it too)."""
    def setup(i: int) -> Callable[[], Any]:
        switches.set(off)
        done = call(i)
        if callable(done):
            return done  # the call's own setup ran with the switches set
        return lambda: done  # (a rerank: timed below)
    return setup


def _timed_rerank(rr: Any, cands: Sequence[tuple[str, str, list[Any]]], switches: Switches,
                  off: str | None) -> Callable[[int], Callable[[], Any]]:
    from .. import T0
    from .timing import K

    def setup(i: int) -> Callable[[], Any]:
        switches.set(off)
        ns, q, candidates = cands[i % len(cands)]

        def work() -> Any:
            ranking = rr.rerank(q, candidates, namespace=ns, k=K, now=T0)
            for item in ranking:
                item.explain()
            return ranking
        return work
    return setup


def _systems(names: Sequence[str | None], retriever: Any, warm: Sequence[Any],
             switches: Switches) -> dict[str | None, Any]:
    from heaprank import Reranker

    from .timing import NoProgress, warm_heaprank

    systems = {}
    for name in names:
        switches.set(name)  # (a feature space without its kernel builds no tables)
        rr = Reranker()
        warm_heaprank(rr, retriever, warm, 0, NoProgress())
        systems[name] = rr
    switches.set(None)
    return systems


def measure(args: argparse.Namespace) -> dict[str, dict[str | None, float]]:
    """p50 microseconds per system, for ``rerank`` and ``feedback``."""
    from . import timing
    from .workload import make_workload

    switches = Switches()
    workload = make_workload(args.seed, args.namespaces, args.memories,
                             args.warm + args.questions)
    retriever = timing.Retriever(workload)
    warm, timed = workload.questions[:args.warm], workload.questions[args.warm:]
    names: list[str | None] = [None, *KERNELS]
    systems = _systems(names, retriever, warm, switches)
    gc.freeze()  # the stores out of the collector's reach, as the latency benchmark does
    cands = [(ns, q, retriever.candidates(ns, q, 50)) for ns, q, _ in timed]
    qtypes = [t for _, _, t in timed]
    out: dict[str, dict[str | None, float]] = {}
    for what in ("rerank", "feedback"):
        calls = {}
        for name, rr in systems.items():
            calls[name] = (_timed_rerank(rr, cands, switches, name) if what == "rerank" else
                           _switched(switches, name, timing.feedback_call(rr, cands, qtypes, 0)))
        samples = timing.interleave(calls, args.calls, 10, clock=time.thread_time_ns)
        switches.set(None)
        out[what] = {name: timing.summarize(s)["p50_ms"] * 1e3 for name, s in samples.items()}
    gc.unfreeze()
    return out


def report(result: dict[str, dict[str | None, float]]) -> None:
    rerank, feedback = result["rerank"], result["feedback"]
    print(f"{'kernel off':<24} {'rerank50+EXPLAIN us':>19} {'x slower':>8} {'share':>6}   "
          f"{'feedback us':>11} {'x slower':>8} {'share':>6}")
    for name in rerank:
        cells = []
        for column in (rerank, feedback):
            on, off = column[None], column[name]
            cells.append(f"{off:>{19 if column is rerank else 11}.1f} {off / on:>8.3f} "
                         f"{(off - on) / off:>6.1%}")
        print(f"{ON if name is None else name:<24} {cells[0]}   {cells[1]}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=1500, help="timed calls per system")
    parser.add_argument("--questions", type=int, default=64, help="timed questions")
    parser.add_argument("--warm", type=int, default=3000, help="warm-up feedbacks per system")
    parser.add_argument("--namespaces", type=int, default=16)
    parser.add_argument("--memories", type=int, default=1500, help="memories per namespace")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    print(f"$ python -m benchmarks kernel-shares {' '.join(sys.argv[2:])}".rstrip())
    print(f"{args.namespaces} namespaces x {args.memories} memories, {args.warm} warm-up "
          f"feedbacks, {args.questions} timed questions, {args.calls} calls per system, "
          f"p50 of thread CPU time")
    report(measure(args))
    return 0

