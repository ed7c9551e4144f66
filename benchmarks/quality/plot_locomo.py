"""``python -m benchmarks plot-locomo [RESULT.json ...] [--out PNG]``: MRR by row, with 95%
bootstrap intervals, from ``python -m benchmarks locomo --out`` files.

With several result files (one per candidate set or feedback mode) each gets its own panel.
Default inputs: the four runs RESULTS.md shows (:data:`DEFAULT_RESULTS`); default output
``benchmarks/figures/locomo_mrr.png``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"
DEFAULT_RESULTS = tuple(RESULTS / f"locomo_{name}.json"
                        for name in ("bm25", "bm25_noisy", "dense", "union"))
COLORS = {"retriever": "#7f7f7f", "heaprank": "#1f77b4", "heapdb-memory": "#ff7f0e"}
GROUPS = ("core", "heapdb", "diagnostics", "ablations")


def load(paths: list[Path]) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


def plot(results: list[dict], out: Path, groups: tuple[str, ...]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heights = [sum(r["group"] in groups for r in res["rows"]) for res in results]
    fig, axes = plt.subplots(len(results), 1, squeeze=False,
                             figsize=(9, 1.2 + 0.32 * sum(heights) + 0.6 * len(results)),
                             gridspec_kw={"height_ratios": heights})
    for ax, res in zip(axes[:, 0], results):
        rows = [r for r in res["rows"] if r["group"] in groups][::-1]
        y = list(range(len(rows)))
        mrr = [r["mrr"] for r in rows]
        err = [[r["mrr"] - r["mrr_ci"][0] for r in rows], [r["mrr_ci"][1] - r["mrr"] for r in rows]]
        colors = [COLORS.get(r["system"], "#2ca02c") for r in rows]
        # Points, not bars: the axis does not start at 0, so bar lengths would mislead.
        for yi, m, lo_e, hi_e, c in zip(y, mrr, err[0], err[1], colors):
            ax.errorbar([m], [yi], xerr=[[lo_e], [hi_e]], fmt="o", color=c, ecolor=c,
                        elinewidth=1.5, capsize=3, markersize=5)
        base = next(r for r in res["rows"] if r["key"] == res["baseline"])
        ax.axvline(base["mrr"], color="#7f7f7f", linestyle="--", linewidth=1)
        ax.set_yticks(y)
        ax.set_yticklabels([r["label"] for r in rows], fontsize=8)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.grid(axis="x", alpha=0.3)
        for yi, r in zip(y, rows):
            ax.text(r["mrr_ci"][1] + 0.003, yi, f"{r['mrr']:.3f}", va="center", fontsize=7)
        p = res["protocol"]
        ax.set_title(f"LoCoMo, candidates {p['candidates']}, feedback {p['feedback']} "
                     f"({res['n_questions']} questions, leave-one-conversation-out)", fontsize=9)
        lo = min(r["mrr_ci"][0] for r in rows)
        ax.set_xlim(max(0.0, lo - 0.05), max(r["mrr_ci"][1] for r in rows) + 0.04)
        ax.tick_params(axis="x", labelsize=8)
    axes[-1, 0].set_xlabel("MRR of the first evidence turn (95% bootstrap interval; "
                           "dashed: the retriever alone)", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="*", type=Path,
                        help="--out files of python -m benchmarks locomo (default: the four "
                        "runs RESULTS.md shows)")
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "benchmarks" / "figures" / "locomo_mrr.png")
    parser.add_argument("--groups", default="core,heapdb",
                        help=f"row groups to plot (from {','.join(GROUPS)})")


def run(args: argparse.Namespace) -> int:
    paths = args.results or list(DEFAULT_RESULTS)
    plot(load(paths), args.out, tuple(g for g in args.groups.split(",") if g))
    print(args.out)
    return 0
