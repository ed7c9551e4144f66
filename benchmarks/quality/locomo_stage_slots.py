"""``python -m benchmarks locomo-stage-slots``: which first-stage slots to keep, on the development
conversations only (issue 24, item 2).

For each first stage, heaprank after oracle feedback (learning from and holding out conversations
0-4 only) with each variant of the first-stage slots: none (the default); rank and gap
(``ranked``); rank alone; gap alone; ``rank:1`` against the rest alone. (Links learned but
left out of the usefulness ranked on were measured at commit d3b8c8f.) A variant replaces the
codes
:func:`heaprank.model.features.stage_codes` gives (rank alone: every gap bucket read as
``gap:0``, a slot then shared by all candidates), so the rows differ in what the slots say.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .harness.options import add_shared, data_path
from .harness.report import diff_text, text_table
from .locomo_first_stage import fold_preps, setup
from .locomo_stages import STAGES

VARIANTS = ("none", "ranked", "rank", "gap", "top1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, "data")
    parser.add_argument("--stages", default=",".join(STAGES), help="first stages, comma-separated")
    add_shared(parser, "seed", "resamples")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="slot variants, comma-separated")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "heaprank-benchmarks"))


def _codes(variant: str, original: Any) -> Any:
    from heaprank.model.features import GAP_SLOTS, N_NEIGHBOUR_CODES, RANK_SLOTS

    if variant in ("none", "ranked"):
        return original

    def codes(order: np.ndarray, relevance: np.ndarray) -> np.ndarray:
        full = original(order, relevance) // N_NEIGHBOUR_CODES - 1
        r, g = full // len(GAP_SLOTS), full % len(GAP_SLOTS)
        if variant == "rank":
            g = np.zeros_like(g)
        elif variant == "gap":
            r = np.zeros_like(r)
        elif variant == "top1":  # rank:1 against the rest, one gap for all
            r, g = np.where(r == 0, 0, len(RANK_SLOTS) - 1), np.zeros_like(g)
        out: np.ndarray = N_NEIGHBOUR_CODES * (1 + len(GAP_SLOTS) * r + g)
        return out

    return codes


def run(args: argparse.Namespace) -> int:
    from heaprank import Config, Features
    from heaprank.scoring import scorer

    from .harness.metrics import Bootstrap, collect
    from .harness.runner import HeaprankRunner

    path = data_path(args.data)
    original = scorer.stage_codes
    lines = ["LoCoMo first-stage slot variants, dev split (learn from and hold out "
             "conversations 0-4), oracle feedback", ""]
    body = []
    for stage in args.stages.split(","):
        ns = argparse.Namespace(first_stage=stage, split="dev", cache=args.cache,
                                conversations=None, questions_limit=None)
        s = setup(ns, path)
        data, folds, training = s["data"], s["folds"], s["training"]
        preps = fold_preps(s, stage, 1.0)
        qs = [q.index for q in data.questions if q.conv in training]
        base = collect([preps[data.questions[qi].conv].retriever_score(qi) for qi in qs]).rr
        boot = Bootstrap(len(qs), resamples=args.resamples, seed=args.seed)
        for variant in args.variants.split(","):
            cfg = Config(features=Features(stage_slots=variant != "none"))
            scorer.stage_codes = _codes(variant, original)  # type: ignore[assignment]
            try:
                scores: list[Any] = []
                for f in folds:
                    runner = HeaprankRunner(preps[f], seed=args.seed,
                                            train_conversations=training)
                    fq = [qi for qi in qs if data.questions[qi].conv == f]
                    scores += runner.evaluate(runner.train(f, cfg, "oracle"), fq)
            finally:
                scorer.stage_codes = original
            rr = collect(scores).rr
            body.append([stage, variant, f"{base.mean():.3f}", f"{rr.mean():.3f}",
                         diff_text(boot.diff(rr, base))])
            print(f"  {stage} {variant}: {rr.mean():.3f}", file=sys.stderr, flush=True)
    lines += text_table(["first stage", "slots", "alone", "+ heaprank oracle", "dMRR vs alone"],
                    body, {2, 3})
    print("\n".join(lines))
    return 0
