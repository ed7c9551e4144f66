"""SQLite feedback throughput of this checkout and another one, in alternating rounds.

Install and run (from the repository root)::

    pip install -e . -r benchmarks/requirements.txt
    git worktree add ../heaprank-before <commit>      # or any folder holding a heaprank/ package
    (cd ../heaprank-before && python setup.py build_ext --inplace)   # its C kernels, if it has any
    python -m benchmarks feedback-procs-ab --against ../heaprank-before [--rounds 6]

Runs the latency benchmark's multi-process SQLite measure (:mod:`benchmarks.speed.feedback_procs`:
processes writing one fresh file at once, one feedback or ``group`` per transaction) for both
checkouts, alternating which goes first in each round, each round in fresh processes; prints
each configuration's median feedbacks/s for both and their ratio. The machine's load changes
from minute to minute: rounds that alternate put both checkouts under the same conditions, and
the median over rounds is the figure to read. ``DIR`` is put first on ``PYTHONPATH`` of the
processes that measure it, so its ``heaprank`` package is the one they import (checked); the
summary says whether each side ran with its C kernels (a checkout whose kernels were not built
runs its pure-Python passes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import REPO_ROOT
from .feedback_procs import PLAN, measure


def one_round(per_process: int) -> dict[str, float]:
    """Every configuration once, in this process's ``heaprank``: ``{config: feedbacks/s}``."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="heaprank-procs-") as tmp:
        for sync, processes, group in PLAN:
            got = measure(tmp, sync, processes, per_process, group)
            out[f"{sync} {processes}p x{group}"] = got["per_s"]
    return out


def _run(folder: Path | None, per_process: int) -> tuple[str, bool, dict[str, float]]:
    """One round in a fresh interpreter importing ``folder``'s heaprank (None: this one's):
    where its heaprank came from, whether its C kernels loaded, and its figures. The
    interpreter (and the processes it spawns, which inherit its ``sys.path``) starts in a folder
    holding only a link to that heaprank, so it comes first, before this checkout's; the
    benchmarks come from this one."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                        else [str(REPO_ROOT)])
    with tempfile.TemporaryDirectory(prefix="heaprank-ab-") as start:
        if folder is not None:
            (Path(start) / "heaprank").symlink_to(folder / "heaprank", target_is_directory=True)
        code = ("import json, sys; from benchmarks.speed.feedback_procs_ab import round_report; "
                "print(json.dumps(round_report(int(sys.argv[1]))))")
        done = subprocess.run([sys.executable, "-c", code, str(per_process)], env=env,
                              cwd=start if folder is not None else REPO_ROOT, check=True,
                              capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return (str(result["from"]), bool(result.get("kernels")),
            {str(k): float(v) for k, v in result["per_s"].items()})


def round_report(per_process: int) -> dict[str, object]:
    """One round in this process's heaprank, for the parent to read: where that heaprank came
    from, whether its C kernels loaded, and the figures."""
    import heaprank

    origin = str(Path(heaprank.__file__).resolve())
    accel = getattr(heaprank, "_accel", None)  # (older trees: one module, "speedups")
    kernels = accel is not None and (any(accel.built().values()) if hasattr(accel, "built")
                                     else getattr(accel, "speedups", None) is not None)
    return {"from": origin, "kernels": kernels, "per_s": one_round(per_process)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--against", metavar="DIR", required=True,
                        help="the other checkout (a heaprank/ in it)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-process", type=int, default=600,
                        help="feedbacks each process gives (the latency benchmark's 600)")


def run(args: argparse.Namespace) -> int:
    other = Path(args.against).resolve()
    if not (other / "heaprank" / "__init__.py").is_file():
        raise SystemExit(f"--against: no heaprank package in {other}")
    runs: dict[str, list[dict[str, float]]] = {"this": [], "against": []}
    kernels: dict[str, bool] = {}
    for r in range(args.rounds):
        order = ("this", "against") if r % 2 == 0 else ("against", "this")
        for label in order:
            origin, kernels[label], got = _run(None if label == "this" else other,
                                               args.per_process)
            expected = ((REPO_ROOT if label == "this" else other) / "heaprank").resolve()
            if Path(origin).parent != expected:
                raise SystemExit(f"{label}: imported heaprank from {origin}, not {expected}")
            runs[label].append(got)
            print(f"round {r + 1} {label:<7} " + "  ".join(f"{k} {v:,.0f}" for k, v in got.items()),
                  flush=True)
    print(f"\nthis: {REPO_ROOT}  against: {other}  (SQLite feedbacks/s, median of {args.rounds} "
          f"alternating rounds, {args.per_process} feedbacks per process; C kernels: this "
          f"{'yes' if kernels['this'] else 'no'}, against {'yes' if kernels['against'] else 'no'})")
    print(f"{'configuration':<18}  {'against':>8}  {'this':>8}  {'x faster':>8}")
    for key in runs["this"][0]:
        before = statistics.median(run[key] for run in runs["against"])
        after = statistics.median(run[key] for run in runs["this"])
        print(f"{key:<18}  {before:>8,.0f}  {after:>8,.0f}  {after / before:>8.2f}")
    return 0

