"""``python -m benchmarks locomo-ablate``: the LoCoMo ablation table, one row per Config change.

Same protocol as ``python -m benchmarks locomo`` (docs/design.md, "Evaluation"): per held-out
conversation, a fresh reranker learns from the feedback of the training conversations, then the
held-out questions are re-ranked in a namespace that never gave feedback. What differs is that
every row is data, an :class:`Ablation`: the Config fields it changes (for training and
evaluation, or for evaluation only), the feedback it learns from, whether its candidates carry a
dense score, and whether its weights are chosen by the grid on the training conversations
(globally, or per question type). A signal another branch adds slots in by naming its Config
field here; a row whose fields this build's Config lacks is listed as not available, not run.

Splits: ``--split dev`` evaluates conversations 0-4 (the development split) and, with
``--train-split dev`` (the default for it), learns only from the other development
conversations, so a choice made on it never sees a test conversation's labels. ``--split test``
evaluates conversations 5-9 with the standard protocol (all nine others give feedback); it is
for the frozen choices only. Each row is compared with the retriever and with heaprank's
defaults after the same feedback, with paired bootstrap intervals.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from .harness.options import add_shared, data_path, dev_split, emit
from .harness.report import CATEGORY, ci_text, diff_text, git_state, text_table

#: The dense fusion weight and the intent multipliers of the quality rows, and where each was
#: chosen (RESULTS.md, "LoCoMo ablations", pastes the runs that chose them).
FUSION_DENSE = 1.0  # dev split, --train-split dev: 0.5 +0.077, 1.0 +0.080, 2.0 +0.065 MRR
INTENT_RECENCY: Mapping[str, float] = {"past": -8.0}  # locomo-ku dev grid (recent: x1 best)
#: A question type gets its own grid weights only with this many training questions.
MIN_QTYPE_QUESTIONS = 60
DEFAULT_CACHE = Path.home() / ".cache" / "heaprank-benchmarks"


@dataclass(frozen=True, slots=True)
class Ablation:
    """One row of the table.

    Attributes:
        key, label, group: Identity and where the row is printed.
        changes: Config fields (``weights`` as a mapping of the exponents that change) applied
            when training and when evaluating.
        eval_changes: Config fields applied at evaluation only, on the reranker trained with
            ``changes`` (scoring fields: a weight switched off, a multiplier).
        train_changes: Config fields applied while training only (exploration).
        feedback: ``None`` for the run's ``--feedback``, or ``"none"``, ``"oracle"``, ``"noisy"``.
        grid: ``"global"`` or ``"qtype"``: the weights are chosen by the grid on the training
            conversations (per question type with enough questions, the global choice else);
            ``"tune"``: fitted by ``Reranker.tune`` on the training feedback log.
        dense: The candidates carry their dense cosine (``metadata.retriever_scores``).
        origin: Where the signal comes from (a branch or an issue), for the reader.
    """

    key: str
    label: str
    group: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    eval_changes: Mapping[str, Any] = field(default_factory=dict)
    train_changes: Mapping[str, Any] = field(default_factory=dict)
    feedback: str | None = None
    grid: str | None = None
    dense: bool = False
    origin: str = ""


_QUALITY = {"features": {"speaker_roles": True},
            "scoring": {"intent_recency": INTENT_RECENCY, "fusion_weights": {"dense": FUSION_DENSE}}}
_CHOSEN = {"scoring": {"fusion_weights": {"dense": FUSION_DENSE}}}

ABLATIONS: tuple[Ablation, ...] = (
    Ablation("nofb", "heaprank defaults, no feedback", "reference", feedback="none"),
    Ablation("fusion_nofb", "heaprank + dense fusion, no feedback", "reference",
             changes=_CHOSEN, feedback="none", dense=True),
    Ablation("default", "heaprank defaults + feedback", "reference"),
    Ablation("grid", "defaults, grid weights (train only)", "reference", grid="global"),
    Ablation("tuned", "defaults, Reranker.tune weights (train log)", "reference", grid="tune"),
    Ablation("fixed", "defaults, weights fixed (no continuous re-fit)", "reference",
             changes={"refit": {"every": 0}}, origin="issue-24"),
    # ---- the seed signals, each on (or off) against the defaults
    Ablation("no_recency", "recency off", "signals", eval_changes={"weights": {"recency": 0.0}}),
    Ablation("no_importance", "importance off (kind priors, insight frequency)", "signals",
             eval_changes={"weights": {"importance": 0.0}}),
    Ablation("no_usefulness", "usefulness off (no learning)", "signals",
             eval_changes={"weights": {"usefulness": 0.0}}),
    Ablation("reinforcement", "reinforcement from use counts (weight 1)", "signals",
             changes={"weights": {"reinforcement": 1.0}}, origin="issue-10-forget"),
    Ablation("ebbinghaus", "Ebbinghaus retention as recency kernel", "signals",
             changes={"retention": {"recency_kernel": "ebbinghaus"}}, origin="issue-10-forget"),
    Ablation("co_use", "co-use spreading activation (weight 1)", "signals",
             changes={"learning": {"co_use": {}}, "weights": {"association": 1.0}},
             origin="issue-10-couse"),
    Ablation("explore_05", "exploration 5% (training)", "signals",
             train_changes={"exploration": {"rate": 0.05, "seed": 0}},
             origin="issue-10-forget"),
    Ablation("explore_20", "exploration 20% (training)", "signals",
             train_changes={"exploration": {"rate": 0.2, "seed": 0}},
             origin="issue-10-forget"),
    # ---- ranking-quality levers, each alone against the defaults
    Ablation("speaker_roles", "- speaker-role slot (on by default)", "quality",
             changes={"features": {"speaker_roles": False}}),
    Ablation("intent", "+ temporal intent x recency", "quality",
             changes={"scoring": {"intent_recency": INTENT_RECENCY}}),
    Ablation("fusion", "+ BM25 x dense fusion", "quality",
             changes=_CHOSEN, dense=True),
    Ablation("qtype_grid", "+ per-question-type grid weights", "quality", grid="qtype"),
    Ablation("combined", "+ all four levers, per-qtype grid", "quality", changes=_QUALITY,
             grid="qtype", dense=True),
    Ablation("fusion_tuned", "+ fusion, Reranker.tune weights", "quality",
             changes=_CHOSEN, dense=True, grid="tune"),
    Ablation("fusion_fixed", "+ fusion, weights fixed (no continuous re-fit)", "quality",
             changes={**_CHOSEN, "refit": {"every": 0}}, dense=True,
             origin="issue-24"),
    # ---- the target: what the dev split chose (fusion alone; the other levers were neutral
    # or slightly negative there), judged on the test split
    Ablation("chosen", "chosen on dev: dense fusion, default weights", "target",
             changes=_CHOSEN, dense=True),
    Ablation("chosen_noisy", "chosen on dev, noisy feedback", "target", changes=_CHOSEN,
             dense=True, feedback="noisy"),
    Ablation("default_noisy", "heaprank defaults + noisy feedback", "target",
             feedback="noisy"),
)
GROUPS = ("reference", "signals", "quality", "target")


def missing_fields(ablation: Ablation) -> list[str]:
    """Config fields (``weights.<signal>``, ``<group>.<field>``) the row needs that this build
    lacks."""
    from heaprank.config import FLAT_KEYS, GROUPS, Config, Weights

    have = {f.name for f in fields(Config)} | set(FLAT_KEYS)  # (a 0.1 key: build_config moves it)
    inner = {"weights": Weights, **GROUPS}
    missing: set[str] = set()
    for changes in (ablation.changes, ablation.eval_changes, ablation.train_changes):
        missing |= set(changes) - have
        for name in set(changes) & set(inner):
            known = {f.name for f in fields(inner[name])}
            missing |= {f"{name}.{k}" for k in changes[name] if k not in known}
    return sorted(missing)


def build_config(base: Any, changes: Mapping[str, Any]) -> Any:
    """``base`` with ``changes`` applied, through the config-file form (``Config.from_dict``),
    so a change is written as a config file would hold it; ``weights`` merge exponent by
    exponent, a settings group field by field."""
    from heaprank.config import FLAT_KEYS, Config

    data = base.to_dict()
    for name, value in changes.items():
        if name in FLAT_KEYS:  # a key of 0.1's flat shape (an old --set): into its group
            name, value = FLAT_KEYS[name][0], {FLAT_KEYS[name][1]: value}
        merge = isinstance(value, Mapping) and isinstance(data.get(name), dict) \
            and name != "qtype_weights"
        data[name] = {**data[name], **value} if merge else value
    return Config.from_dict(data)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, "data")
    parser.add_argument("--feedback", choices=("oracle", "noisy"), default="oracle",
                        help="feedback of rows that do not name their own (default oracle)")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev",
                        help="held-out conversations: dev 0-4, test 5-9, all (default dev)")
    parser.add_argument("--train-split", choices=("dev", "all"),
                        help="conversations that give feedback: 'dev' only the development "
                        "split, 'all' every other conversation (default: dev for --split dev, "
                        "else all)")
    parser.add_argument("--rows", help="row keys, comma-separated (default every row; "
                        f"groups {', '.join(GROUPS)} also accepted)")
    parser.add_argument("--set", action="append", default=[], metavar="ROW.FIELD=JSON",
                        help="override a Config change of a row, e.g. "
                        "fusion.scoring.fusion_weights='{\"dense\": 0.5}' (dev-split exploration)")
    parser.add_argument("--protocol", choices=("loo", "online"), default="loo",
                        help="loo: the held-out conversation gives no feedback (default); "
                        "online: its questions are asked in turn, each giving feedback that "
                        "later ones use")
    add_shared(parser, "questions-limit", "seed", "resamples")
    parser.add_argument("--cache", metavar="DIR", default=str(DEFAULT_CACHE),
                        help=f"dense embeddings cache, outside the repo (default {DEFAULT_CACHE}; "
                        "'none' to recompute)")
    add_shared(parser, "json", "out", "no-progress")


def _set(changes: Mapping[str, Any], name: str, value: Any) -> dict[str, Any]:
    """``changes`` with ``name`` (a Config field, or ``group.field``) set to ``value``."""
    group, _, inner = name.partition(".")
    if not inner:
        return {**changes, name: value}
    return {**changes, group: {**changes.get(group, {}), inner: value}}


def _select(arg: str | None, overrides: Sequence[str]) -> list[Ablation]:
    rows = list(ABLATIONS)
    if arg:
        wanted = [w.strip() for w in arg.split(",") if w.strip()]
        known = {a.key for a in rows} | set(GROUPS)
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ValueError(f"--rows: unknown {unknown}; rows: "
                             f"{', '.join(a.key for a in rows)}; groups: {', '.join(GROUPS)}")
        rows = [a for a in rows if a.key in wanted or a.group in wanted]
    for item in overrides:
        target, _, value = item.partition("=")
        key, _, name = target.partition(".")
        if not name or not value:
            raise ValueError(f"--set: expected ROW.FIELD=JSON (FIELD: weights, or GROUP.FIELD "
                             f"such as scoring.intent_recency), got {item!r}")
        rows = [replace(a, changes=_set(a.changes, name, json.loads(value))) if a.key == key
                else a for a in rows]
    return rows


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from heaprank.config import Config

    from .harness.data import load_locomo
    from .harness.runner import HeaprankRunner

    started = time.perf_counter()
    try:
        path = data_path(args.data)
        rows = _select(args.rows, args.set)
    except (FileNotFoundError, ValueError) as exc:
        print(f"python -m benchmarks locomo-ablate: {exc}", file=sys.stderr)
        return 2
    data = load_locomo(path, questions_per_conversation=args.questions_limit)
    folds, train_split, train_convs = _splits(args, len(data.conversations))
    runnable = [a for a in rows if not missing_fields(a)]
    preps = _preps(data, path, args, any(a.dense for a in runnable))
    fold_qs = {f: [q.index for q in data.questions if q.conv == f] for f in folds}
    qs = [qi for f in folds for qi in fold_qs[f]]
    bar = tqdm(total=len(folds) * len(runnable), disable=args.no_progress, file=sys.stderr,
               desc="locomo-ablate", unit="row")
    runners = {d: HeaprankRunner(p, seed=args.seed, train_conversations=train_convs)
               for d, p in preps.items()}
    where = {qi: i for i, qi in enumerate(qs)}
    scores: dict[str, list[Any]] = {"retriever": [preps[False].retriever_score(qi) for qi in qs]}
    chosen: dict[str, dict[str, Any]] = {}
    default = Config()
    for f in folds:
        trained: dict[tuple[str, str, bool], Any] = {}
        sid = data.conversations[f].sample_id
        for a in runnable:
            mode = a.feedback or args.feedback
            runner = runners[a.dense]
            cfg = build_config(default, a.changes)
            train_cfg = build_config(cfg, a.train_changes)
            key = (json.dumps(train_cfg.to_dict(), sort_keys=True, default=str), mode, a.dense)
            if key not in trained:
                trained[key] = runner.train(f, train_cfg, mode, label=f"{a.key}")
            rr = trained[key]
            eval_cfg = build_config(cfg, a.eval_changes)
            if a.grid is not None:
                eval_cfg, choice = _chosen_weights(a.grid, rr, runner, eval_cfg, f)
                chosen.setdefault(a.key, {})[sid] = choice
            scores.setdefault(a.key, [None] * len(qs))
            if args.protocol == "online":
                trained.pop(key)  # its state now holds this conversation's own feedback
                got = online(runner, rr, fold_qs[f], eval_cfg, mode, f)
            else:
                got = runner.evaluate(rr, fold_qs[f], config=eval_cfg)
            for qi, s in zip(fold_qs[f], got):
                scores[a.key][where[qi]] = s
            bar.update(1)
    bar.close()
    result = _report(data, qs, rows, scores, chosen, args, {
        "data": str(path), "folds": folds, "train_split": train_split,
        "seconds": time.perf_counter() - started})
    emit(result, render(result), args)
    return 0


def _splits(args: argparse.Namespace, n_conv: int
            ) -> tuple[list[int], str, frozenset[int] | None]:
    """The held-out conversations of ``--split``, the name of ``--train-split`` and the
    conversations that give feedback (None: every other one)."""
    dev = set(dev_split(n_conv, halve_small=True))
    folds = sorted(dev if args.split == "dev" else set(range(n_conv)) - dev
                   if args.split == "test" else set(range(n_conv)))
    train_split = args.train_split or ("dev" if args.split == "dev" else "all")
    return folds, train_split, frozenset(dev) if train_split == "dev" else None


def _preps(data: Any, path: Path, args: argparse.Namespace, dense: bool) -> dict[bool, Any]:
    """The BM25 top 50 as heaprank sees them (``False``), and with their dense cosine
    (``True``) when a row needs it."""
    from .harness.data import BM25Scorer, DenseScorer, build_candidates
    from .harness.runner import prepare

    lists = build_candidates(data, "bm25", bm25=BM25Scorer(data))
    preps = {False: prepare(data, lists, 1.0)}
    if dense:
        cache = None if args.cache == "none" else Path(args.cache).expanduser() / (
            f"minilm_{path.stem}_{len(data.questions)}.npz")
        preps[True] = prepare(data, lists, 1.0, dense=DenseScorer(data, cache=cache))
    return preps


def _chosen_weights(grid: str, rr: Any, runner: Any, eval_cfg: Any, fold: int
                    ) -> tuple[Any, dict[str, Any]]:
    """``eval_cfg`` with the weights a row chooses on the training conversations, and the
    record of the choice: ``Reranker.tune`` on the training feedback log (the held-out
    conversation gave none), or the grid (per question type with enough questions)."""
    from heaprank.config import SIGNALS, Weights
    from heaprank.model.questions import english_question_type

    if grid == "tune":
        fit = rr.tune()
        return replace(eval_cfg, weights=fit.config.weights), {
            "weights": {k: round(v, 3) for k, v in zip(SIGNALS, fit.config.weights.as_tuple())},
            "qtype": {}, "moved": fit.moved}
    view = rr.with_config(scoring={n: getattr(eval_cfg.scoring, n) for n in ("fusion_weights",
                                                                          "intent_recency")})
    train_qs = [qi for qi in runner.order if runner.prep.data.questions[qi].conv != fold]
    points, rrs = runner.grid(view, train_qs)
    best = points[int(np.argmax(np.round(rrs.mean(axis=0), 12)))]
    eval_cfg = replace(eval_cfg, weights=Weights(**best))
    per_type: dict[str, dict[str, float]] = {}
    if grid == "qtype":
        questions = runner.prep.data.questions
        types = np.array([english_question_type(questions[qi].text) for qi in train_qs])
        for qt in sorted(set(types.tolist())):
            mask = types == qt
            if mask.sum() < MIN_QTYPE_QUESTIONS:
                continue
            pick = points[int(np.argmax(np.round(rrs[mask].mean(axis=0), 12)))]
            if pick != best:
                per_type[qt] = pick
        eval_cfg = replace(eval_cfg, qtype_weights={qt: Weights(**w)
                                                    for qt, w in per_type.items()})
    return eval_cfg, {"weights": best, "qtype": per_type}


def online(runner: Any, rr: Any, questions: Sequence[int], config: Any, mode: str,
           fold: int) -> list[Any]:
    """The online protocol: the held-out conversation's questions are asked one after the
    other (a seeded order, one hour apart) in its own namespace; each is scored on its full
    ranking, then gives feedback on its ten shown, so later questions learn from earlier ones
    (what per-document mechanisms need: the same memories, asked about again)."""
    from .harness.metrics import score_ranking
    from .harness.runner import SHOWN_K, cited, feedback_noise

    prep = runner.prep
    order = [qi for qi in runner.order_all if qi in set(questions)]
    out: dict[int, Any] = {}
    for step, qi in enumerate(order):
        q = prep.data.questions[qi]
        cands, ev = prep.cands(qi), prep.ev(qi)
        if not cands:
            out[qi] = score_ranking((), ev)
            continue
        ranking = rr.rerank(q.text, cands, namespace=prep.namespaces[q.conv], k=SHOWN_K,
                            now=prep.times[q.conv] + 3600.0 * step, config=config)
        out[qi] = score_ranking(ranking.order_ids, ev)
        if mode == "none":
            continue
        answers, rng = feedback_noise(mode, runner.seed, fold, qi)
        if not answers:
            continue
        rr.feedback(ranking.recall_id, used=cited(rng, ranking.ids, ev))
    return [out[qi] for qi in questions]


def _report(data: Any, qs: list[int], rows: list[Ablation], scores: dict[str, list[Any]],
            chosen: dict[str, Any], args: argparse.Namespace, run: dict[str, Any]
            ) -> dict[str, Any]:
    """The result: every row's statistics, the targets, and what the run was (``run``: the
    data path, the held-out ``folds``, the ``train_split`` and the ``seconds`` it took)."""
    out_rows = _row_stats(data, qs, rows, scores, args)
    return {
        "benchmark": "locomo-ablate", "git": git_state(),
        "command": "python -m benchmarks locomo-ablate " + " ".join(sys.argv[2:]),
        "data": run["data"], "split": args.split, "train_split": run["train_split"],
        "folds": [data.conversations[f].sample_id for f in run["folds"]], "n_questions": len(qs),
        "feedback": args.feedback, "seed": args.seed, "protocol": args.protocol,
        "rows": out_rows,
        "not_available": {a.key: missing_fields(a) for a in rows if missing_fields(a)},
        "chosen_weights": chosen, "targets": _targets(out_rows),
        "seconds": round(run["seconds"], 1),
        "quality_constants": {"fusion_dense": FUSION_DENSE,
                              "intent_recency": dict(INTENT_RECENCY),
                              "min_qtype_questions": MIN_QTYPE_QUESTIONS},
    }


def _row_stats(data: Any, qs: list[int], rows: list[Ablation], scores: dict[str, list[Any]],
               args: argparse.Namespace) -> list[dict[str, Any]]:
    """The retriever's row, then each row that ran: MRR, recall, differences to the retriever
    and to the defaults after feedback, MRR by category, the Config changes."""
    from .harness.metrics import Bootstrap, collect

    boot = Bootstrap(len(qs), resamples=args.resamples, seed=args.seed)
    per_q = {k: collect(v) for k, v in scores.items()}
    cats = np.array([data.questions[qi].category for qi in qs])
    ref = "default" if "default" in per_q else None
    out_rows = []
    for key in per_q:
        a = next((r for r in rows if r.key == key), None)
        pq = per_q[key]
        row: dict[str, Any] = {
            "key": key, "label": a.label if a else "BM25 top 50 (bm25s)",
            "group": a.group if a else "reference", "origin": a.origin if a else "",
            "feedback": (a.feedback or args.feedback) if a else "none",
            "mrr": float(pq.rr.mean()), "mrr_ci": boot.interval(pq.rr),
            "recall@5": float(pq.metric("recall@5").mean()),
            "recall@10": float(pq.metric("recall@10").mean()),
            "vs_retriever": boot.diff(pq.rr, per_q["retriever"].rr),
            "per_category": {str(c): float(pq.rr[cats == c].mean())
                             for c in sorted(set(cats.tolist()))},
        }
        if ref is not None:
            row["vs_default"] = boot.diff(pq.rr, per_q[ref].rr)
        if a is not None:
            row["changes"] = {k: v for k, v in (("changes", a.changes),
                                                ("eval_changes", a.eval_changes),
                                                ("train_changes", a.train_changes),
                                                ("grid", a.grid), ("dense", a.dense)) if v}
        out_rows.append(row)
    return out_rows


def _targets(out_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue-10 targets, judged on the ``chosen`` row (when it ran)."""
    by = {r["key"]: r for r in out_rows}
    targets: dict[str, Any] = {}
    if "chosen" in by:
        c, base = by["chosen"], by["retriever"]
        targets["gain_over_bm25_at_least_0.08"] = {
            "diff": c["vs_retriever"]["diff"], "ci": c["vs_retriever"]["ci"],
            "met": c["vs_retriever"]["diff"] >= 0.08}
        below = [k for k, v in c["per_category"].items() if v < base["per_category"][k]]
        targets["no_category_below_retriever"] = {"below": below, "met": not below}
        if "chosen_noisy" in by:
            ratio = (by["chosen_noisy"]["mrr"] - base["mrr"]) / (c["mrr"] - base["mrr"])
            targets["noisy_keeps_80_percent"] = {"ratio": ratio, "met": ratio >= 0.8}
    return targets


def render(res: dict[str, Any]) -> str:
    out = [f"LoCoMo ablations ({res['protocol']}): held out {', '.join(res['folds'])} "
           f"({res['split']} split, "
           f"{res['n_questions']} questions); feedback from the {res['train_split']} "
           f"conversations, {res['feedback']} unless a row says; BM25 top 50 candidates", ""]
    rows = res["rows"]
    has_ref = any("vs_default" in r for r in rows)
    header = ["row", "fb", "MRR", "95% CI", "R@5", "R@10", "dMRR vs BM25"]
    header += ["dMRR vs defaults+fb"] if has_ref else []
    for group in GROUPS:
        body = [[r["label"], r["feedback"], f"{r['mrr']:.3f}", ci_text(r["mrr_ci"]),
                 f"{r['recall@5']:.3f}", f"{r['recall@10']:.3f}", diff_text(r["vs_retriever"])]
                + ([diff_text(r["vs_default"]) if "vs_default" in r else ""] if has_ref else [])
                for r in rows if r["group"] == group]
        if body:
            out += [f"{group}:"] + text_table(header, body, {2, 4, 5}) + [""]
    cats = sorted(rows[0]["per_category"])
    body = [[r["label"]] + [f"{r['per_category'][c]:.3f}" for c in cats] for r in rows
            if r["group"] in ("reference", "target")]
    out += text_table(["MRR by category"] + [f"{c} {CATEGORY.get(c, '')}" for c in cats], body,
                  set(range(1, len(cats) + 1))) + [""]
    for key, missing in res["not_available"].items():
        out.append(f"not in this build: {key} (Config lacks {', '.join(missing)})")
    for key, per_fold in res["chosen_weights"].items():
        out.append(f"weights of {key} (usefulness, recency; per question type where it "
                   "differs), chosen on the training conversations:")
        for sid, ch in per_fold.items():
            w = ch["weights"]
            extra = "".join(f", {qt} ({p['usefulness']:g}, {p['recency']:g})"
                            for qt, p in ch["qtype"].items())
            still = " (the fit did not move)" if ch.get("moved") is False else ""
            out.append(f"  {sid}: ({w['usefulness']:g}, {w['recency']:g}){extra}{still}")
    for name, t in res["targets"].items():
        detail = (f"{t['diff']:+.3f} {ci_text(t['ci'])}" if "diff" in t else
                  f"ratio {t['ratio']:.3f}" if "ratio" in t else
                  f"below: {', '.join(t['below']) or 'none'}")
        out.append(f"target {name}: {detail} -> {'MET' if t['met'] else 'NOT MET'}")
    out.append(f"wall time {res['seconds']:.0f} s")
    return "\n".join(out)

