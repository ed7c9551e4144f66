"""``python -m benchmarks exploration``: what exploration costs and what it recovers when the
feedback source is biased toward the top (docs/design.md, "Exploration").

The LoCoMo protocol of :mod:`benchmarks.quality.harness.runner` (leave one conversation out, BM25 top 50,
every turn a memory, each conversation a namespace), restricted to the development
conversations (0-4 by default: exploration's rate is a choice, so it is measured where choices
are made, and the run stays small), with a feedback source that only sees the top:

- ``top3`` (default): the user is shown the top 3 and reports the evidence among them; anything
  ranked lower never gets a chance to be used;
- ``position``: the top 10 are shown, rank ``i`` is examined with probability ``1 / i`` and
  examined evidence is reported; evidence that was shown but not examined counts as ignored.

Per exploration rate, with ``--seeds`` seeds (the exploration draws and the examination noise):

- *online MRR*: the reciprocal rank of the first evidence turn in the rankings users were shown
  while feedback was gathered (training questions); the drop from rate 0 is what exploring costs;
- *held-out MRR*: each held-out conversation re-ranked afterwards, exploration off, as a new
  namespace (``track=False``), as in the LoCoMo benchmark;
- *recovered*: ``(held-out(rate) - held-out(0)) / (held-out(unbiased) - held-out(0))``, where
  *unbiased* is the same run with the LoCoMo benchmark's oracle feedback on the top 10 and no
  exploration: the share of the gain lost to the biased source that exploration wins back.

Intervals are paired bootstrap intervals over held-out questions (each question's score averaged
over seeds first). Everything is seeded: the same command prints the same numbers.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .harness.options import add_shared, data_path, emit

FEEDBACK = ("top3", "position")
DEFAULT_RATES = "0,0.05,0.1,0.2"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, "data")
    parser.add_argument("--conversations", default="0,1,2,3,4",
                        help="conversations used, by index (default the development split 0-4)")
    parser.add_argument("--rates", default=DEFAULT_RATES,
                        help=f"exploration rates, comma-separated (default {DEFAULT_RATES})")
    parser.add_argument("--feedback", choices=FEEDBACK, default="top3",
                        help="the biased feedback source (default top3)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per rate (default 3)")
    add_shared(parser, "seed", "resamples", "json", "out")


def _examined(rng: np.random.Generator, shown: Sequence[str], mode: str) -> list[str]:
    """The shown items the biased user looks at."""
    if mode == "top3":
        return list(shown[:3])
    return [d for i, d in enumerate(shown, start=1) if rng.random() < 1.0 / i]


def _train(runner: Any, fold: int, config: Any, mode: str, seed: int) -> tuple[Any, list[float]]:
    """A reranker taught by the biased source on every conversation but ``fold``; returns it
    and the reciprocal rank of every training ranking (what users saw)."""
    from heaprank.reranker import Reranker

    from .harness.metrics import score_ranking

    prep = runner.prep
    rr = Reranker(config=config)
    online: list[float] = []
    shown_k = 3 if mode == "top3" else 10
    for qi in runner.order:
        q = prep.data.questions[qi]
        if q.conv == fold or not prep.candidates[qi]:
            continue
        ranking = rr.rerank(q.text, prep.candidates[qi], namespace=prep.namespaces[q.conv],
                            k=shown_k, now=prep.times[q.conv])
        evidence = prep.evidence[qi]
        online.append(score_ranking(ranking.order_ids, evidence)[0])
        rng = np.random.default_rng([seed, fold, qi, 0xB1A5])
        used = [d for d in _examined(rng, ranking.ids, mode) if d in evidence]
        rr.feedback(ranking.recall_id, used=used)
    return rr, online


def run(args: argparse.Namespace) -> int:
    from heaprank.config import Config

    from .harness.data import BM25Scorer, build_candidates, load_locomo
    from .harness.metrics import Bootstrap
    from .harness.runner import HeaprankRunner, prepare

    started = time.perf_counter()
    keep = sorted({int(c) for c in args.conversations.split(",") if c.strip()})
    problem = "needs at least 2 conversations" if len(keep) < 2 else None
    data = None
    try:  # only the first max(keep) + 1 conversations are read
        if problem is None:
            data = load_locomo(data_path(args.data), conversations=max(keep) + 1)
    except FileNotFoundError as exc:
        problem = str(exc)
    if data is None:
        print(f"python -m benchmarks exploration: {problem}", file=sys.stderr)
        return 2
    rates = [float(r) for r in args.rates.split(",")]
    if 0.0 not in rates:
        rates = [0.0] + rates
    lists = build_candidates(data, "bm25", bm25=BM25Scorer(data))
    prep = prepare(data, lists, 1.0)
    runner = HeaprankRunner(prep, seed=args.seed)
    # Only the kept conversations teach and are held out.
    runner.order = [qi for qi in runner.order if data.questions[qi].conv in keep]
    held = [q.index for q in data.questions if q.conv in keep]
    fold_qs = {f: [qi for qi in held if data.questions[qi].conv == f] for f in keep}
    where = {qi: i for i, qi in enumerate(held)}

    baseline = np.array([prep.retriever_score(qi)[0] for qi in held])
    unbiased = np.zeros(len(held))
    for f in keep:
        rr = runner.train(f, Config(), "oracle")
        for qi, s in zip(fold_qs[f], runner.evaluate(rr, fold_qs[f])):
            unbiased[where[qi]] = s[0]

    heldout, online = _explored(runner, rates, keep, fold_qs, where, args)
    boot = Bootstrap(len(held), resamples=args.resamples, seed=args.seed)
    lost = float(unbiased.mean() - heldout[0.0].mean())
    rows = []
    for rate in rates:
        diff = boot.diff(heldout[rate], heldout[0.0])
        rows.append({
            "rate": rate, "online_mrr": float(np.mean(online[rate])),
            "online_cost": float(np.mean(online[0.0]) - np.mean(online[rate])),
            "heldout_mrr": float(heldout[rate].mean()),
            "heldout_ci": boot.interval(heldout[rate]),
            "vs_rate0": diff["diff"], "vs_rate0_ci": diff["ci"],
            "recovered": diff["diff"] / lost if lost > 0 else float("nan")})
    result = {
        "benchmark": "exploration", "feedback": args.feedback, "conversations": keep,
        "questions_heldout": len(held), "training_reranks_per_run": len(runner.order),
        "seeds": args.seeds, "bm25_mrr": float(baseline.mean()),
        "unbiased_mrr": float(unbiased.mean()), "unbiased_ci": boot.interval(unbiased),
        "rows": rows, "seconds": round(time.perf_counter() - started, 1)}
    emit(result, render(result), args, indent=2)
    return 0


def _explored(runner: Any, rates: list[float], keep: list[int], fold_qs: dict[int, list[int]],
              where: dict[int, int], args: argparse.Namespace
              ) -> tuple[dict[float, np.ndarray], dict[float, list[float]]]:
    """Per rate, each held-out question's reciprocal rank (averaged over seeds) after training
    with exploration on, and the reciprocal ranks users were shown while it trained."""
    from heaprank.config import Config, Exploration

    heldout = {r: np.zeros(len(where)) for r in rates}
    online: dict[float, list[float]] = {r: [] for r in rates}
    for rate in rates:
        for s in range(args.seeds):
            seed = args.seed * 1000 + s
            for f in keep:
                cfg = Config(exploration=Exploration(rate=rate, seed=seed * 100 + f))
                rr, seen = _train(runner, f, cfg, args.feedback, seed)
                online[rate].extend(seen)
                scores = runner.evaluate(rr.with_config(exploration={"rate": 0.0}), fold_qs[f])
                for qi, sc in zip(fold_qs[f], scores):
                    heldout[rate][where[qi]] += sc[0] / args.seeds
    return heldout, online


def render(result: dict[str, Any]) -> str:
    lo, hi = result["unbiased_ci"]
    lines = [f"LoCoMo conversations {','.join(map(str, result['conversations']))}, BM25 top 50, "
             f"feedback {result['feedback']} (biased toward the top), {result['seeds']} seeds, "
             f"{result['questions_heldout']} held-out questions",
             f"BM25 alone MRR {result['bm25_mrr']:.4f}; unbiased oracle feedback (top 10, no "
             f"exploration) MRR {result['unbiased_mrr']:.4f} [{lo:.4f}, {hi:.4f}]",
             f"{'rate':>5}  {'online MRR':>10}  {'cost':>7}  {'held-out MRR':>12}  "
             f"{'95% CI':>17}  {'vs rate 0':>9}  {'95% CI':>17}  {'recovered':>9}"]
    for r in result["rows"]:
        lines.append(
            f"{r['rate']:5.2f}  {r['online_mrr']:10.4f}  {r['online_cost']:+7.4f}  "
            f"{r['heldout_mrr']:12.4f}  [{r['heldout_ci'][0]:.4f}, {r['heldout_ci'][1]:.4f}]  "
            f"{r['vs_rate0']:+9.4f}  [{r['vs_rate0_ci'][0]:+.4f}, {r['vs_rate0_ci'][1]:+.4f}]  "
            f"{r['recovered']:9.1%}")
    lines.append(f"({result['seconds']} s)")
    return "\n".join(lines)
