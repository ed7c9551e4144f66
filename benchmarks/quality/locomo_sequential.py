"""``python -m benchmarks locomo-sequential``: LoCoMo questions asked over time, where what was
learned about a conversation's own documents can pay off (co-use edges, ``doc:`` links).

The leave-one-conversation-out protocol of ``locomo`` scores each conversation as a newcomer, so
per-document mechanisms cannot show anything there. Here:

- every usable question of every conversation is asked once, in one seeded order (each
  conversation's questions in a random order, the conversations interleaved), the j-th question
  of a conversation ``j`` hours after its question time;
- each question is re-ranked over its candidates (BM25 top 50) by a state that has learned only
  from the questions asked *before* it (of its own conversation and, through the pool, of the
  others), and scored on the full re-ranked list; then the answer's feedback arrives for the top
  10 shown (*oracle*: the evidence turns shown are used; *noisy*: as in ``locomo``);
- each row is one configuration, run through the same sequence with its own state; document ids
  are made unique per conversation (``sample_id/dia_id``), so a pooled ``doc:`` link cannot pass
  from one conversation to another.

Rows are configurations, by name (``--rows``) from :data:`ROWS`, or given as JSON with ``--row
NAME=JSON`` (:class:`heaprank.Config` in its ``to_dict`` shape: ``weights`` and each settings
group as objects), so a new signal is measured without editing this file. Every difference comes with a
paired bootstrap interval, also over the *later* questions alone (those with at least half of
their conversation's questions before them), where the history is longest.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from .harness.options import RETRIEVER_LABEL, add_shared, config_from_json, data_path, emit, named_json
from .harness.report import CATEGORY

#: The named rows: ``None`` is the retriever alone; a dict is a Config in JSON form.
ROWS: dict[str, dict[str, Any] | None] = {
    "bm25": None,
    "default": {},
    "co-use": {"learning": {"co_use": {}}, "weights": {"association": 1.0}},
    "doc": {"features": {"doc_features": True}},
    "co-use+doc": {"learning": {"co_use": {}}, "weights": {"association": 1.0},
                   "features": {"doc_features": True}},
    # the weights fixed as configured: no continuous re-fit (Config.refit.every)
    "fixed": {"refit": {"every": 0}},
    # BM25 fused with the dense cosine (needs --dense), re-fitted or fixed
    "fusion": {"scoring": {"fusion_weights": {"dense": 1.0}}},
    "fusion-fixed": {"scoring": {"fusion_weights": {"dense": 1.0}}, "refit": {"every": 0}},
}
DEFAULT_ROWS = "bm25,default,co-use,doc,co-use+doc"
SHOWN_K = 10
HOUR_S = 3600.0
#: The noise stream of this protocol, apart from every leave-one-out fold's (which use 0-9).
NOISE_STREAM = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, "data")
    parser.add_argument("--feedback", choices=("oracle", "noisy"), default="oracle",
                        help="the feedback each answered question gives (default oracle)")
    parser.add_argument("--rows", default=DEFAULT_ROWS,
                        help=f"named rows, comma-separated (default {DEFAULT_ROWS}; known: "
                        f"{', '.join(ROWS)})")
    parser.add_argument("--row", action="append", default=[], metavar="NAME=JSON",
                        help="an extra row: a name and a Config as JSON, e.g. "
                        "'w2={\"co_use\": {}, \"weights\": {\"association\": 2}}' (repeatable)")
    parser.add_argument("--dense", action="store_true",
                        help="each candidate also carries its all-MiniLM-L6-v2 cosine "
                        "(metadata.retriever_scores.dense), for rows with fusion_weights")
    parser.add_argument("--now-offset-days", type=float, default=1.0,
                        help="the first question comes this long after the last session")
    add_shared(parser, "seed", "conversations", "questions-limit", "resamples", "json", "out",
               "no-progress", "no-timing")


def _row_specs(args: argparse.Namespace) -> dict[str, dict[str, Any] | None]:
    specs: dict[str, dict[str, Any] | None] = {}
    for name in (n.strip() for n in args.rows.split(",") if n.strip()):
        if name not in ROWS:
            raise ValueError(f"--rows: unknown row {name!r}; known: {', '.join(ROWS)}")
        specs[name] = ROWS[name]
    for text in args.row:
        name, spec = named_json(text, "--row")
        specs[name] = spec
    return specs


def question_sequence(data: Any, seed: int) -> list[tuple[int, int]]:
    """``(question index, its position in its conversation's sequence)`` in asking order: one
    seeded permutation of every question, which also orders each conversation's own."""
    from .harness.runner import training_order

    seen: dict[int, int] = {}
    out = []
    for qi in training_order(data, seed):
        conv = data.questions[qi].conv
        out.append((qi, seen.get(conv, 0)))
        seen[conv] = seen.get(conv, 0) + 1
    return out


def _run_row(rr: Any, prep: Any, sequence: list[tuple[int, int]], mode: str, seed: int,
             tick: Any) -> tuple[list[Any], dict[str, float]]:
    """Ask every question in order; score each before its own feedback."""
    from .harness.metrics import score_ranking
    from .harness.runner import cited, feedback_noise

    scores: list[Any] = [None] * len(prep.data.questions)
    stats = {"reranks": 0, "rerank_s": 0.0, "feedbacks": 0, "feedback_s": 0.0,
             "with_edges": 0, "evidence_pair": 0, "evidence_other": 0}
    for qi, j in sequence:
        tick(1)
        q = prep.data.questions[qi]
        cands, ev = prep.cands(qi, True), prep.ev(qi, True)
        if not cands:
            scores[qi] = score_ranking((), ev)
            continue
        if rr.config.learning.co_use is not None:  # what the edges could do for this question
            _, _, edges = rr.state.read_with_edges(prep.namespaces[q.conv], [],
                                                   [c.id for c in cands])
            is_ev = np.array([c.id in ev for c in cands])
            a, b = is_ev[edges.i], is_ev[edges.j]
            stats["with_edges"] += len(edges) > 0
            stats["evidence_pair"] += bool((a & b).any())
            stats["evidence_other"] += bool((a ^ b).any())
        t0 = time.perf_counter()
        ranking = rr.rerank(q.text, cands, namespace=prep.namespaces[q.conv], k=SHOWN_K,
                            now=prep.times[q.conv] + j * HOUR_S)
        stats["rerank_s"] += time.perf_counter() - t0
        stats["reranks"] += 1
        scores[qi] = score_ranking(ranking.order_ids, ev)
        answers, rng = feedback_noise(mode, seed, NOISE_STREAM, qi)
        if not answers:
            continue
        used = cited(rng, ranking.ids, ev)
        t0 = time.perf_counter()
        rr.feedback(ranking.recall_id, used=used)
        stats["feedback_s"] += time.perf_counter() - t0
        stats["feedbacks"] += 1
    return scores, stats


def run(args: argparse.Namespace) -> int:
    from heaprank import Reranker

    from .harness.data import BM25Scorer, DenseScorer, build_candidates, load_locomo
    from .harness.metrics import collect
    from .harness.runner import prepare

    started = time.perf_counter()
    try:
        path = data_path(args.data)
        specs = _row_specs(args)
        configs = {name: None if spec is None else config_from_json(spec)
                   for name, spec in specs.items()}
    except (FileNotFoundError, ValueError) as exc:
        print(f"python -m benchmarks locomo-sequential: {exc}", file=sys.stderr)
        return 2
    data = load_locomo(path, conversations=args.conversations,
                       questions_per_conversation=args.questions_limit)
    lists = build_candidates(data, "bm25", bm25=BM25Scorer(data))
    dense = DenseScorer(data, progress=False) if args.dense else None
    prep = prepare(data, lists, args.now_offset_days, unique_ids=True, dense=dense)
    sequence = question_sequence(data, args.seed)
    n_conv = {c: len(data.by_conv(c)) for c in range(len(data.conversations))}
    later = np.array([j >= n_conv[data.questions[qi].conv] / 2 for qi, j in
                      sorted(sequence)], dtype=bool)

    from tqdm import tqdm

    bar = tqdm(total=len(sequence) * sum(c is not None for c in configs.values()),
               disable=args.no_progress, file=sys.stderr, unit="q",
               desc=f"locomo-sequential/{args.feedback}", mininterval=0.5, dynamic_ncols=True)
    per_q: dict[str, Any] = {}
    extra: dict[str, dict[str, Any]] = {}
    for name, cfg in configs.items():
        if cfg is None:
            per_q[name] = collect([prep.retriever_score(q.index, unique=True)
                                   for q in data.questions])
            continue
        rr = Reranker(config=cfg)
        scores, stats = _run_row(rr, prep, sequence, args.feedback, args.seed, bar.update)
        per_q[name] = collect(scores)
        extra[name] = _row_extra(rr, prep, stats, args.no_timing)
    bar.close()
    names = list(configs)
    baseline = names[0]
    reference = "default" if "default" in names else baseline
    cats = np.array([q.category for q in data.questions])
    result = {
        "benchmark": "locomo-sequential",
        "retriever": RETRIEVER_LABEL["bm25"] + (" + MiniLM cosine" if args.dense else ""),
        "feedback": args.feedback, "seed": args.seed, "n_questions": len(data.questions),
        "n_later": int(later.sum()), "shown_k": SHOWN_K, "resamples": args.resamples,
        "rows": [_row_stats(name, per_q, specs[name], extra.get(name, {}), later, cats,
                            (baseline, reference), args) for name in names],
    }
    if not args.no_timing:
        result["total_s"] = round(time.perf_counter() - started, 1)
    emit(result, _table(result, baseline, reference), args)
    return 0


def _row_extra(rr: Any, prep: Any, stats: dict[str, float], no_timing: bool) -> dict[str, Any]:
    """What a configuration's run leaves: edges, feedbacks, final weights, re-fits, and how
    many questions its edges reached."""
    edges = sum(len(rr.state.list_edges(ns)) for ns in prep.namespaces)
    reach = {k: stats[k] for k in ("with_edges", "evidence_pair", "evidence_other")}
    fitted = rr.stats()["weights_fitted"]
    out = {"edges": edges, "feedbacks": int(stats["feedbacks"]),
           "weights": {k: round(v, 3) for k, v in rr.stats()["weights"].items()},
           "refits": 0 if fitted is None else fitted["version"], "questions_reached": reach}
    if not no_timing:
        out["rerank_mean_ms"] = round(1000 * stats["rerank_s"] / max(stats["reranks"], 1), 3)
        out["feedback_mean_ms"] = round(1000 * stats["feedback_s"] / max(stats["feedbacks"], 1), 3)
    return out


def _row_stats(name: str, per_q: dict[str, Any], spec: Any, extra: dict[str, Any],
               later: np.ndarray, cats: np.ndarray, refs: tuple[str, str],
               args: argparse.Namespace) -> dict[str, Any]:
    """One row's metrics and its paired differences, on all questions and on the later ones,
    to the retriever, to ``default`` and to its fixed-weights twin."""
    from .harness.metrics import Bootstrap

    boot = Bootstrap(len(later), resamples=args.resamples, seed=args.seed)
    late_boot = Bootstrap(int(later.sum()), resamples=args.resamples, seed=args.seed)
    pq = per_q[name]
    row: dict[str, Any] = {
        "row": name, "config": spec,
        "mrr": round(float(pq.rr.mean()), 5), "mrr_ci": [round(x, 5) for x in boot.interval(pq.rr)],
        "recall@5": round(float(pq.recall[5].mean()), 5),
        "recall@10": round(float(pq.recall[10].mean()), 5),
        "later_mrr": round(float(pq.rr[later].mean()), 5),
        "mrr_by_category": {CATEGORY.get(str(c), str(c)): round(float(pq.rr[cats == c].mean()), 5)
                            for c in sorted(set(cats.tolist()))},
        **extra,
    }
    baseline, reference = refs
    twin = name + "-fixed" if name != "default" else "fixed"  # the same row, weights fixed
    pairs = [("vs_" + baseline, baseline), ("vs_" + reference, reference)]
    if twin in per_q:
        pairs.append(("vs_" + twin, twin))
    for label, other in pairs:
        if other != name:
            d = boot.diff(pq.rr, per_q[other].rr)
            dl = late_boot.diff(pq.rr[later], per_q[other].rr[later])
            row[label] = {"diff": round(d["diff"], 5), "ci": [round(x, 5) for x in d["ci"]],
                          "later_diff": round(dl["diff"], 5),
                          "later_ci": [round(x, 5) for x in dl["ci"]]}
    return row


def _table(result: dict[str, Any], baseline: str, reference: str) -> str:
    lines = [f"LoCoMo sequential: {result['n_questions']} questions asked over time, "
             f"{result['retriever']}, {result['feedback']} feedback from earlier questions only "
             f"(top {result['shown_k']} shown); later = the {result['n_later']} questions with at "
             f"least half of their conversation's before them; 95% paired bootstrap "
             f"({result['resamples']} resamples)",
             "",
             f"{'row':<12} {'MRR':>6} {'95% CI':>16} {'R@5':>6} {'R@10':>6} {'later':>6}  "
             f"{'MRR vs ' + baseline:<25} {'MRR vs ' + reference:<25} {'later vs ' + reference:<25}"
             f" {'edges':>6}"]

    def diff(row: dict[str, Any], other: str, later: bool = False) -> str:
        d = row.get("vs_" + other)
        if d is None:
            return ""
        value, ci = (d["later_diff"], d["later_ci"]) if later else (d["diff"], d["ci"])
        return f"{value:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"

    for row in result["rows"]:
        ci = f"[{row['mrr_ci'][0]:.3f}, {row['mrr_ci'][1]:.3f}]"
        lines.append(f"{row['row']:<12} {row['mrr']:>6.3f} {ci:>16} {row['recall@5']:>6.3f} "
                     f"{row['recall@10']:>6.3f} {row['later_mrr']:>6.3f}  "
                     f"{diff(row, baseline):<25} {diff(row, reference):<25} "
                     f"{diff(row, reference, later=True):<25} {row.get('edges', ''):>6}")
    lines.append("")
    for row in result["rows"]:
        reach = row.get("questions_reached")
        if reach and row.get("edges"):
            lines.append(f"{row['row']}: questions with an edge among their candidates "
                         f"{reach['with_edges']}, joining two evidence turns {reach['evidence_pair']}, "
                         f"joining evidence to a non-evidence turn {reach['evidence_other']}")
    for row in result["rows"]:
        if row.get("refits"):
            lines.append(f"{row['row']}: {row['refits']} re-fits, weights at the end "
                         + ", ".join(f"{k} {v:g}" for k, v in row["weights"].items() if v))
        for key in (k for k in row if k.startswith("vs_") and k.endswith("fixed")):
            d = row[key]
            lines.append(f"{row['row']} vs {key[3:]} (continuous re-fit vs fixed weights): "
                         f"MRR {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}], later "
                         f"{d['later_diff']:+.3f} [{d['later_ci'][0]:+.3f}, {d['later_ci'][1]:+.3f}]")
    lines.append("MRR by category: " + "; ".join(
        f"{row['row']} " + ", ".join(f"{c} {v:.3f}" for c, v in row["mrr_by_category"].items())
        for row in result["rows"]))
    if "total_s" in result:
        lines.append(f"wall time {result['total_s']} s")
    return "\n".join(lines)
