"""heaprank's benchmarks, kept outside the installed package, grouped by what they measure:

- :mod:`benchmarks.quality`: ranking quality on LoCoMo (and data written into its format), all
  through one harness, :mod:`benchmarks.quality.harness`;
- :mod:`benchmarks.speed`: the time of heaprank's calls (latency beside heapdb-memory, profiles,
  the C kernels' shares, re-fits, the event loop of the async paths);
- :mod:`benchmarks.state`: what the state backends hold and cost (bytes per feedback and link,
  Redis capacity, restarts, resharding, concurrent clients).

Run from the repository root, after ``pip install -r benchmarks/requirements.txt``::

    python -m benchmarks locomo --candidates bm25 --feedback oracle
    python -m benchmarks latency --quick
    python -m benchmarks backends --quick

:data:`BENCHMARKS` is the one index of commands. Each module it names exposes
``add_arguments(parser)`` and ``run(args) -> int`` and imports its heavy dependencies (bm25s,
sentence-transformers, heapdb-memory) only inside ``run``.
"""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path
from types import ModuleType

#: The repository checkout these benchmarks live in (git commit, default data path).
REPO_ROOT = Path(__file__).resolve().parent.parent
#: The synthetic workloads' fixed clock ("now", epoch seconds).
T0 = 1_780_000_000.0

#: ``name: (module, help)`` of every ``python -m benchmarks NAME``.
BENCHMARKS = {
    # ---- quality: LoCoMo evidence retrieval and its variants
    "locomo": ("benchmarks.quality.locomo",
               "LoCoMo evidence retrieval, side by side with heapdb-memory"),
    "locomo-ablate": ("benchmarks.quality.locomo_ablate",
                      "LoCoMo ablation table: each signal and quality lever, one Config per row"),
    "locomo-ku": ("benchmarks.quality.locomo_ku",
                  "knowledge-update questions written into LoCoMo: temporal intent x recency"),
    "locomo-roles": ("benchmarks.quality.locomo_roles",
                     "questions about the assistant's or the user's own turns written into "
                     "LoCoMo: the speaker-role slot"),
    "locomo-stage-slots": ("benchmarks.quality.locomo_stage_slots",
                           "which first-stage slots to keep (development conversations)"),
    "locomo-sequential": ("benchmarks.quality.locomo_sequential",
                          "LoCoMo questions asked over time: per-document learning (co-use, doc:)"),
    "locomo-langchain": ("benchmarks.quality.locomo_langchain",
                         "LoCoMo end to end through langchain-heaprank (dense candidates, oracle)"),
    "exploration": ("benchmarks.quality.exploration", "exploration's MRR cost and what it recovers "
                    "from feedback biased toward the top (LoCoMo development conversations)"),
    "views": ("benchmarks.quality.views", "a real SQLite state built from LoCoMo (development "
              "conversations), then heaprank tune, replay, forget --preview and plot run on it"),
    "plot-locomo": ("benchmarks.quality.plot_locomo",
                    "draw MRR by row, with intervals, from locomo --out files"),
    # ---- speed: the time of heaprank's calls
    "latency": ("benchmarks.speed.latency", "rerank latency, feedback throughput and memory"),
    "latency-runs": ("benchmarks.speed.latency_runs",
                     "several latency --out files side by side, one line each"),
    "profile-rerank": ("benchmarks.speed.profile_rerank",
                       "where a rerank's and a feedback's time goes; or two checkouts side by side"),
    "kernel-shares": ("benchmarks.speed.kernel_shares",
                      "each C kernel's share of a rerank of 50 and of a memory feedback"),
    "row-cache": ("benchmarks.speed.row_cache", "the worst single rerank while the row cache "
                  "fills with unseen labels, kernels and pure Python side by side"),
    "cold-calls": ("benchmarks.speed.cold_calls",
                   "small numpy calls warm and with cold caches, beside plain Python"),
    "feedback-procs-ab": ("benchmarks.speed.feedback_procs_ab",
                          "SQLite feedback throughput of this checkout and another, alternating"),
    "refit-cost": ("benchmarks.speed.refit_cost", "the cost of one continuous re-fit of the "
                   "weights, by impression-log size and backend"),
    "loop-lag": ("benchmarks.speed.loop_lag", "whether the framework packages' async paths let "
                 "the event loop run, on a Redis state"),
    # ---- state: what the backends hold and cost
    "footprint": ("benchmarks.state.footprint",
                  "state bytes per feedback and per link; caller texts"),
    "backends": ("benchmarks.state.backends", "memory, SQLite, Redis and Redis Cluster with "
                 "concurrent clients"),
    "redis-load": ("benchmarks.state.redis_load", "a Redis server's restart with a heaprank state "
                   "loaded: AOF and RDB load time, file size, used_memory"),
    "reshard": ("benchmarks.state.reshard", "heaprank state reshard (32 -> 64 pooled shards) of a "
                "loaded Redis state while writer processes apply feedback"),
    "mcp-overhead": ("benchmarks.speed.mcp_overhead",
                     "rerank + feedback over MCP stdio beside the same calls in process"),
}


class MissingRequirement(ImportError):
    """A package from ``benchmarks/requirements.txt`` is not installed."""


def require(module: str, *, feature: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingRequirement` naming the requirements file."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingRequirement(f"{feature} needs the '{module}' package: "
                                 "pip install -r benchmarks/requirements.txt") from exc


def git(*argv: str) -> str:
    """What ``git argv`` prints in this checkout, stripped; "" when git fails or is missing."""
    try:
        proc = subprocess.run(["git", "-C", str(REPO_ROOT), *argv], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""
