"""Plot rerank latency against candidate count from ``python -m benchmarks latency --json``.

Install and run (from the repository root)::

    pip install -e . -r benchmarks/requirements.txt
    python -m benchmarks latency --out benchmarks/results/latency.json
    python benchmarks/plot_latency.py [benchmarks/results/latency.json] \
        [-o benchmarks/figures/latency.png]

One panel per backend, log-log: p50 (solid, markers) and p95 (dashed) of rerank without EXPLAIN,
with EXPLAIN on the top 10, and with EXPLAIN on all n (k=n); heapdb-memory's recall (its BM25
step included, k=10, EXPLAIN) from the same run as the black reference line, and the 10x target
at 50 candidates. heapdb-memory ranks only what its BM25 step matched (min(n, hits)), so its
line is drawn at that pool size, not at n. Only numbers the benchmark wrote are drawn.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLORS = {"rerank": "tab:blue", "rerank+explain": "tab:orange", "rerank+explain k=n": "tab:green"}


def plot(result: dict, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = list(dict.fromkeys(r["backend"] for r in result["rerank"]))
    fig, axes = plt.subplots(1, len(backends), figsize=(6.2 * len(backends), 4.8), squeeze=False,
                             sharey=True)
    ref = sorted(result.get("reference_recall", []), key=lambda r: r["n"])
    for ax, backend in zip(axes[0], backends, strict=True):
        for mode, color in COLORS.items():
            rows = sorted((r for r in result["rerank"]
                           if r["backend"] == backend and r["mode"] == mode), key=lambda r: r["n"])
            if not rows:
                continue
            n = [r["n"] for r in rows]
            label = {"rerank": "rerank, k=10", "rerank+explain": "rerank + EXPLAIN, k=10",
                     "rerank+explain k=n": "rerank + EXPLAIN, k=n"}[mode]
            ax.plot(n, [r["p50_ms"] for r in rows], "o-", color=color, label=f"{label} p50")
            ax.plot(n, [r["p95_ms"] for r in rows], "--", color=color, alpha=0.7,
                    label=f"{label} p95")
        if ref:
            # At the candidates it actually ranked: min(n, BM25 hits), its own BM25 step included.
            n = [r["pool_mean"] for r in ref]
            ax.plot(n, [r["p50_ms"] for r in ref], "s-", color="black",
                    label="heapdb-memory recall + EXPLAIN, k=10, p50 (x = its pool)")
            ax.plot(n, [r["p95_ms"] for r in ref], ":", color="black",
                    label="heapdb-memory recall p95")
            at50 = [r for r in ref if r["n"] == 50]
            if at50:
                ax.plot([50], [at50[0]["p50_ms"] / 10], "*", color="red", markersize=12,
                        label="target at 50: recall p50 / 10")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("candidates (n)")
        ax.set_title(f"heaprank, {backend} backend")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("latency per call (ms)")
    axes[0][-1].legend(fontsize=7, loc="upper left")
    sw, m = result["software"], result["machine"]
    fig.suptitle(f"python -m benchmarks latency: {result['started_utc']}, commit {sw['commit']}, "
                 f"{m['cpu']} ({m['cores']} cores); "
                 "heapdb-memory drawn at its pool, min(n, BM25 hits)",
                 fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="?", default=str(HERE / "results" / "latency.json"))
    parser.add_argument("-o", "--out", default=str(HERE / "figures" / "latency.png"))
    args = parser.parse_args(argv)
    result = json.loads(Path(args.json).read_text(encoding="utf-8"))
    print(plot(result, Path(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
