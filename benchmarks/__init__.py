"""heaprank's benchmarks: LoCoMo ranking quality and latency, kept outside the installed package.

Run from the repository root, after ``pip install -r benchmarks/requirements.txt``::

    python -m benchmarks locomo --candidates bm25 --feedback oracle
    python -m benchmarks latency --quick
    python -m benchmarks backends --quick

Each benchmark module exposes ``add_arguments(parser)`` and ``run(args) -> int`` and imports its
heavy dependencies (bm25s, sentence-transformers, heapdb-memory) only inside ``run``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

#: The repository checkout these benchmarks live in (git commit, default data path).
REPO_ROOT = Path(__file__).resolve().parent.parent

BENCHMARKS = {
    "locomo": ("benchmarks.locomo", "LoCoMo evidence retrieval, side by side with heapdb-memory"),
    "latency": ("benchmarks.latency", "rerank latency, feedback throughput and memory"),
    "footprint": ("benchmarks.footprint", "state bytes per feedback and per link; caller texts"),
    "backends": ("benchmarks.backends", "memory, SQLite, Redis and Redis Cluster with concurrent "
                 "clients"),
    "locomo-ablate": ("benchmarks.locomo_ablate",
                      "LoCoMo ablation table: each signal and quality lever, one Config per row"),
    "locomo-ku": ("benchmarks.locomo_ku",
                  "knowledge-update questions written into LoCoMo: temporal intent x recency"),
    "locomo-roles": ("benchmarks.locomo_roles",
                     "questions about the assistant's or the user's own turns written into "
                     "LoCoMo: the speaker-role slot"),
    "locomo-stage-slots": ("benchmarks.locomo_stage_slots",
                           "which first-stage slots to keep (development conversations)"),
    "exploration": ("benchmarks.exploration", "exploration's MRR cost and what it recovers "
                    "from feedback biased toward the top (LoCoMo development conversations)"),
    "locomo-sequential": ("benchmarks.locomo_sequential",
                          "LoCoMo questions asked over time: per-document learning (co-use, doc:)"),
    "locomo-langchain": ("benchmarks.locomo_langchain",
                         "LoCoMo end to end through langchain-heaprank (dense candidates, oracle)"),
    "refit-cost": ("benchmarks.refit_cost", "the cost of one continuous re-fit of the weights, "
                   "by impression-log size and backend"),
    "redis-load": ("benchmarks.redis_load", "a Redis server's restart with a heaprank state "
                   "loaded: AOF and RDB load time, file size, used_memory"),
    "reshard": ("benchmarks.reshard", "heaprank state reshard (32 -> 64 pooled shards) of a "
                "loaded Redis state while writer processes apply feedback"),
    "views": ("benchmarks.views", "a real SQLite state built from LoCoMo (development "
              "conversations), then heaprank tune, replay, forget --preview and plot run on it"),
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
