"""``python -m benchmarks locomo``: LoCoMo evidence retrieval, heaprank beside its retriever and
beside heapdb-memory 0.1.0, leave-one-conversation-out (docs/design.md, "Evaluation").

One command runs one candidate set (``--candidates``) with one kind of feedback
(``--feedback``) and every row that goes with it:

- ``core``: the retriever alone; heaprank with default weights and no feedback; heaprank after
  feedback from the other nine conversations, with default weights and with weights chosen by a
  grid on the training conversations only (``--feedback noisy`` adds the oracle row as the
  reference the noisy gain is measured against);
- ``heapdb``: heapdb-memory's relevance-only config, its defaults, its learned usefulness after the
  same feedback, and that with ``w_recency = 0``;
- ``diagnostics``: the candidate ceiling, per-category MRR, the learned links of each fold, and
  the recency effect (questions asked one day vs 30 days after the last session, recency on/off);
- ``ablations``: each signal off in turn; and each learning option flipped against the default:
  EM vs uniform credit, ``doc:`` links (with ids made unique across conversations, so a pooled
  ``doc:D1:3`` cannot leak between them), position-discounted rejects.

The ``heapdb`` group also re-ranks heapdb-memory's own candidates with heaprank (same lists, same
feedback): re-ranking against re-ranking, with retrieval held equal.

heaprank's defaults were chosen on a development split (README: conversations 0-4), so every
number is repeated on the other conversations (``test_split`` in the JSON), the honest held-out
view of the defaults; ``--dev-conversations`` names the split.

Everything is seeded: the same command prints the same numbers (``--no-timing`` drops the wall
times, the only part that varies). The data is read from ``--data``, never copied.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from . import REPO_ROOT

ROW_GROUPS = ("core", "heapdb", "diagnostics", "ablations")
#: Relative to the repository root, so the default does not depend on the working directory.
DEFAULT_DATA = "../shared/data/locomo10.json"
#: heaprank's default weights, recency floor, reject discount and prior were chosen on these
#: (README, "a development split of LoCoMo (conversations 0-4)"), so only the others are
#: held out for the defaults.
DEV_CONVERSATIONS = "0,1,2,3,4"
RETRIEVER_LABEL = {"bm25": "BM25 top 50 (bm25s)", "dense": "dense top 50 (MiniLM-L6)",
                   "union": "BM25 + dense union (fused)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", metavar="PATH",
                        help=f"locomo10.json (default $HEAPRANK_LOCOMO, or {DEFAULT_DATA} from the "
                        "repository root)")
    parser.add_argument("--candidates", choices=("bm25", "dense", "union"), default="bm25",
                        help="candidate retriever (default bm25)")
    parser.add_argument("--feedback", choices=("oracle", "noisy", "none"), default="oracle",
                        help="feedback the other conversations give (default oracle)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rows", default=",".join(ROW_GROUPS),
                        help=f"row groups, comma-separated (default all: {','.join(ROW_GROUPS)})")
    parser.add_argument("--folds", help="held-out conversations to evaluate (indices or "
                        "sample ids, comma-separated; default all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of orders, noise, bootstrap")
    parser.add_argument("--dev-conversations", default=DEV_CONVERSATIONS,
                        help="conversations heaprank's defaults were chosen on (README: 0-4); "
                        "every number is repeated without them ('none' to skip)")
    parser.add_argument("--now-offset-days", type=float, default=1.0,
                        help="questions are asked this long after the last session (default 1)")
    parser.add_argument("--conversations", type=int, help="use only the first N conversations")
    parser.add_argument("--questions-limit", type=int,
                        help="use only the first N usable questions of each conversation")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON result here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-timing", action="store_true",
                        help="leave wall times out (byte-identical output across runs)")
    from . import locomo_first_stage

    locomo_first_stage.add_arguments(parser)


def _data_path(arg: str | None) -> Path:
    default = str((REPO_ROOT / DEFAULT_DATA).resolve())
    candidates = [arg] if arg else [os.environ.get("HEAPRANK_LOCOMO"), default]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    raise FileNotFoundError(f"LoCoMo data not found ({arg or DEFAULT_DATA}); pass --data PATH "
                            "to a copy of locomo10.json (github.com/snap-research/locomo)")


def augmented_data(args: argparse.Namespace, augment: Any, command: str) -> tuple[Path, Any] | None:
    """``(path, raw)``: the LoCoMo file of ``--data`` rewritten by ``augment(raw, args.seed)``
    (saved to ``--write`` when given), for the test sets built from it; None once the missing
    file is reported."""
    try:
        path = _data_path(args.data)
    except FileNotFoundError as exc:
        print(f"python -m benchmarks {command}: {exc}", file=sys.stderr)
        return None
    raw = augment(json.loads(path.read_text(encoding="utf-8")), args.seed)
    if args.write:
        Path(args.write).write_text(json.dumps(raw, indent=1), encoding="utf-8")
    return path, raw


def _folds(arg: str | None, data: Any) -> list[int]:
    if not arg:
        return list(range(len(data.conversations)))
    ids = {c.sample_id: i for i, c in enumerate(data.conversations)}
    out = []
    for part in arg.split(","):
        part = part.strip()
        if part in ids:
            out.append(ids[part])
        elif part.isdigit() and int(part) < len(data.conversations):
            out.append(int(part))
        else:
            raise ValueError(f"--folds: unknown conversation {part!r}")
    return sorted(set(out))


def _dev_conversations(arg: str | None, data: Any) -> list[int]:
    """Indices of the development conversations that exist in this run (ids or indices)."""
    text = (arg or "").strip()
    if text.lower() in ("", "none"):
        return []
    ids = {c.sample_id: i for i, c in enumerate(data.conversations)}
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        index = int(part) if part.isdigit() else ids.get(part, -1)
        if 0 <= index < len(data.conversations):
            out.add(index)
    return sorted(out)


class _Rows:
    """Per-question scores of every row, filled fold by fold."""

    def __init__(self, questions: Sequence[int]) -> None:
        self.questions = list(questions)
        self.where = {qi: i for i, qi in enumerate(self.questions)}
        self.scores: dict[str, list[Any]] = {}
        self.meta: dict[str, dict[str, Any]] = {}

    def add(self, key: str, label: str, group: str, system: str, feedback: str,
            config: dict[str, Any]) -> None:
        if key not in self.scores:
            self.scores[key] = [None] * len(self.questions)
            self.meta[key] = {"label": label, "group": group, "system": system,
                              "feedback": feedback, "config": config}

    def put(self, key: str, questions: Sequence[int], scores: Sequence[Any]) -> None:
        row = self.scores[key]
        for qi, s in zip(questions, scores):
            row[self.where[qi]] = s


def _heaprank_config(cfg: Any, **extra: Any) -> dict[str, Any]:
    out = cfg.to_dict()
    out.update(extra)
    return out


def run(args: argparse.Namespace) -> int:
    from heaprank.config import SIGNALS, Config
    from heaprank.reranker import Reranker

    from . import heapdb_ref
    from .locomo_data import BM25Scorer, DenseScorer, build_candidates, load_locomo
    from .locomo_report import finish
    from .locomo_sim import HeaprankRunner, eval_questions, prepare, top_links
    from .metrics import score_ranking

    started = time.perf_counter()
    try:
        path = _data_path(args.data)
    except FileNotFoundError as exc:
        print(f"python -m benchmarks locomo: {exc}", file=sys.stderr)
        return 2
    if args.first_stage or args.summarize:
        from . import locomo_first_stage

        if args.summarize:
            print(locomo_first_stage.summarize(args.summarize))
            return 0
        return locomo_first_stage.run(args, path)
    groups = [g.strip() for g in args.rows.split(",") if g.strip()]
    unknown = set(groups) - set(ROW_GROUPS)
    if unknown:
        print(f"python -m benchmarks locomo: --rows: unknown group(s) {sorted(unknown)}; "
              f"choose from {', '.join(ROW_GROUPS)}", file=sys.stderr)
        return 2
    data = load_locomo(path, conversations=args.conversations,
                       questions_per_conversation=args.questions_limit)
    if len(data.conversations) < 2:
        print("python -m benchmarks locomo: leave-one-conversation-out needs at least 2 conversations",
              file=sys.stderr)
        return 2
    folds = _folds(args.folds, data)
    dev = _dev_conversations(args.dev_conversations, data)
    kind, mode = args.candidates, args.feedback
    timing: dict[str, Any] = {}

    # ---------------------------------------------------------------- candidates
    t0 = time.perf_counter()
    bm25 = BM25Scorer(data)
    dense = DenseScorer(data, progress=False) if kind in ("dense", "union") else None
    lists = build_candidates(data, kind, bm25=bm25, dense=dense)
    bm25_lists = lists if kind == "bm25" else build_candidates(data, "bm25", bm25=bm25)
    prep = prepare(data, lists, args.now_offset_days, unique_ids="ablations" in groups)
    timing["candidates_s"] = round(time.perf_counter() - t0, 2)

    qs = eval_questions(data, folds)
    rows = _Rows(qs)
    n_train = {f: sum(q.conv != f for q in data.questions) for f in folds}
    fold_qs = {f: [qi for qi in qs if data.questions[qi].conv == f] for f in folds}
    learn = mode != "none"

    # A progress total from the plan (one tick per rerank or recall).
    core, diag, abl = ("core" in groups), ("diagnostics" in groups), ("ablations" in groups)
    noisy = mode == "noisy"
    total = len(qs) * (1 + diag * 2)
    if learn:
        total += sum(n_train[f] for f in folds) * (1 + core + 2 * (noisy and core) + abl * 3)
        total += len(qs) * (1 + core * (1 + 2 * noisy) + (diag or abl) + diag + abl * 6)
    if "heapdb" in groups:
        total += 2 * len(qs) + (sum(n_train[f] for f in folds) + 2 * len(qs)) * learn
        total += (sum(n_train[f] for f in folds) * 2 + 2 * len(qs)) * (learn and core)
    from tqdm import tqdm

    bar = tqdm(total=total, disable=args.no_progress, file=sys.stderr, unit="q",
               desc=f"locomo {kind}/{mode}", mininterval=0.5, dynamic_ncols=True)
    tick = bar.update
    runner = HeaprankRunner(prep, seed=args.seed, tick=tick)

    # ----------------------------------------------------------- retriever rows
    base_key = "baseline"
    base_cfg = {"retriever": kind, "top_n": 50, "bm25": "bm25s lucene k1=1.2 b=0.75, "
                "stopwords + light stemming", "dense": "all-MiniLM-L6-v2 cosine",
                "union_score": "mean of min-max BM25 and min-max cosine over the union"}
    rows.add(base_key, RETRIEVER_LABEL[kind], "core", "retriever", "none", base_cfg)
    rows.put(base_key, qs, [score_ranking([c.id for c in prep.candidates[qi]], prep.evidence[qi])
                            for qi in qs])
    bm25_key = base_key
    if kind != "bm25":
        bm25_key = "bm25"
        rows.add(bm25_key, RETRIEVER_LABEL["bm25"], "core", "retriever", "none",
                 {"retriever": "bm25", "top_n": 50})
        rows.put(bm25_key, qs, [score_ranking(
            [data.conversations[data.questions[qi].conv].turns[t].id
             for t in bm25_lists[qi].turns.tolist()], prep.evidence[qi]) for qi in qs])

    # ------------------------------------------------------ heaprank, no feedback
    t0 = time.perf_counter()
    default = Config()
    rr0 = Reranker(config=default)
    rows.add("heaprank_default", "heaprank defaults, no feedback", "core", "heaprank", "none",
             _heaprank_config(default))
    rows.put("heaprank_default", qs, runner.evaluate(rr0, qs))
    norec = default.with_weights(recency=0.0)
    if "diagnostics" in groups:
        rows.add("nofb_norecency", "heaprank no feedback, recency off", "diagnostics",
                 "heaprank", "none", _heaprank_config(norec))
        rows.put("nofb_norecency", qs, runner.evaluate(rr0, qs, config=norec))
        rows.add("nofb_30d", "heaprank no feedback, asked +30 days", "diagnostics", "heaprank",
                 "none", _heaprank_config(default, eval_offset_days=30.0))
        rows.put("nofb_30d", qs, runner.evaluate(rr0, qs, offset_days=30.0))

    # ------------------------------------------------- heaprank, after feedback
    chosen: dict[str, Any] = {}
    chosen_on_heapdb: dict[str, Any] = {}
    chosen_oracle: dict[str, Any] = {}
    grids: dict[str, Any] = {}
    links: dict[str, Any] = {}
    if learn:
        main = f"heaprank_{mode}"
        rows.add(main, f"heaprank + {mode} feedback", "core", "heaprank", mode,
                 _heaprank_config(default))
        if mode == "noisy" and "core" in groups:
            rows.add("heaprank_oracle", "heaprank + oracle feedback (reference)", "core",
                     "heaprank", "oracle", _heaprank_config(default))
            rows.add("heaprank_oracle_grid", "heaprank + oracle, grid weights (reference)",
                     "core", "heaprank", "oracle", _heaprank_config(
                         default, weights="chosen per fold on training conversations, see "
                         "diagnostics.chosen_weights_oracle"))
        for f in folds:
            sid = data.conversations[f].sample_id
            fq = fold_qs[f]
            rr = runner.train(f, default, mode)
            rows.put(main, fq, runner.evaluate(rr, fq))
            links[sid] = top_links(rr)
            if "core" in groups:
                train_qs = [qi for qi in runner.order if data.questions[qi].conv != f]
                weights, table = runner.choose_weights(rr, f, train_qs)
                chosen[sid] = weights
                grids[sid] = sorted(table, key=lambda r: -r["train_mrr"])[:5]
                cfg = default.with_weights(**weights)
                rows.add(f"{main}_grid", f"heaprank + {mode}, grid weights (train only)", "core",
                         "heaprank", mode, _heaprank_config(
                             default, weights="chosen per fold on training conversations, "
                             "see diagnostics.chosen_weights"))
                rows.put(f"{main}_grid", fq, runner.evaluate(rr, fq, config=cfg))
                if mode == "noisy":
                    oracle = runner.train(f, default, "oracle")
                    rows.put("heaprank_oracle", fq, runner.evaluate(oracle, fq))
                    weights, _ = runner.choose_weights(oracle, f, train_qs)
                    chosen_oracle[sid] = weights
                    rows.put("heaprank_oracle_grid", fq, runner.evaluate(
                        oracle, fq, config=default.with_weights(**weights)))
            if "diagnostics" in groups or "ablations" in groups:
                rows.add(f"{main}_norecency", f"heaprank + {mode}, recency off",
                         "diagnostics", "heaprank", mode, _heaprank_config(norec))
                rows.put(f"{main}_norecency", fq, runner.evaluate(rr, fq, config=norec))
            if "diagnostics" in groups:
                rows.add(f"{main}_30d", f"heaprank + {mode}, asked +30 days", "diagnostics",
                         "heaprank", mode, _heaprank_config(default, eval_offset_days=30.0))
                rows.put(f"{main}_30d", fq, runner.evaluate(rr, fq, offset_days=30.0))
            if "ablations" in groups:
                for signal in SIGNALS:
                    if signal == "recency" or getattr(default.weights, signal) == 0:
                        continue  # the diagnostics row f"{main}_norecency"; off already
                    cfg = default.with_weights(**{signal: 0.0})
                    key = f"abl_no_{signal}"
                    rows.add(key, f"ablation: {signal} off ({mode})", "ablations", "heaprank",
                             mode, _heaprank_config(cfg))
                    rows.put(key, fq, runner.evaluate(rr, fq, config=cfg))
                # Each learning option flipped against the default (whichever it is).
                other: Literal["none", "log"] = (
                    "none" if default.reject_discount == "log" else "log")
                for key, label, cfg, unique in (
                        ("abl_credit", "EM credit" if not default.em_credit else "uniform credit",
                         replace(default, em_credit=not default.em_credit), False),
                        ("abl_doc_links", ("without" if default.doc_features else "with")
                         + " doc: links", replace(default, doc_features=not default.doc_features),
                         True),
                        ("abl_reject_discount", f"reject discount {other!r}",
                         replace(default, reject_discount=other), False)):
                    rows.add(key, f"ablation: {label} ({mode})", "ablations", "heaprank", mode,
                             _heaprank_config(cfg))
                    variant = runner.train(f, cfg, mode, unique=unique, label=key)
                    rows.put(key, fq, runner.evaluate(variant, fq, unique=unique))
    timing["heaprank_s"] = round(time.perf_counter() - t0, 2)

    # ------------------------------------------------------------ heapdb-memory
    heapdb_timer = None
    if "heapdb" in groups:
        t0 = time.perf_counter()
        embedder = None
        hybrid = dense is not None
        if dense is not None:
            texts = {}
            for ci, conv in enumerate(data.conversations):
                for t in conv.turns:
                    texts[t.text] = dense.turns[ci][t.index]
            for q in data.questions:
                texts[q.text] = dense.questions[q.index]
            embedder = heapdb_ref.CachedEmbedder(texts, dense.encode)
        what = "hybrid (BM25 + MiniLM)" if hybrid else "BM25"
        hd = heapdb_ref.HeapdbRunner(data, prep.times, seed=args.seed, order=runner.order,
                                     embedder=embedder, tick=tick)
        cfgs = heapdb_ref.configs()
        mem0 = hd.build(range(len(data.conversations)))
        rows.add("heapdb_bm25", f"heapdb-memory {what} relevance only", "heapdb",
                 "heapdb-memory", "none", cfgs["bm25"].to_dict())
        rows.put("heapdb_bm25", qs, hd.evaluate(mem0, qs, cfgs["bm25"]))
        rows.add("heapdb_defaults", "heapdb-memory defaults, no feedback", "heapdb",
                 "heapdb-memory", "none", cfgs["defaults"].to_dict())
        rows.put("heapdb_defaults", qs, hd.evaluate(mem0, qs, cfgs["defaults"]))
        if learn and "core" in groups:
            # heaprank re-ranking heapdb-memory's own candidates: the same lists, the same
            # feedback, so the comparison is re-ranking against re-ranking.
            hprep = prepare(data, heapdb_ref.candidate_lists(mem0, data, prep.times, cfgs["bm25"]),
                            args.now_offset_days)
            hrun = HeaprankRunner(hprep, seed=args.seed, tick=tick)
            k1, k2 = f"heaprank_{mode}_on_heapdb", f"heaprank_{mode}_grid_on_heapdb"
            on = "heapdb-memory's relevance-only recall (its candidates, its relevance score)"
            rows.add(k1, f"heaprank + {mode} on heapdb-memory's candidates", "heapdb",
                     "heaprank", mode, _heaprank_config(default, candidates=on))
            rows.add(k2, f"heaprank + {mode}, grid, on heapdb-memory's candidates", "heapdb",
                     "heaprank", mode, _heaprank_config(default, candidates=on, weights=(
                         "chosen per fold on training conversations, see "
                         "diagnostics.chosen_weights_on_heapdb")))
            for f in folds:
                sid, fq = data.conversations[f].sample_id, fold_qs[f]
                rr = hrun.train(f, default, mode, label=f"{mode}_on_heapdb")
                rows.put(k1, fq, hrun.evaluate(rr, fq))
                train_qs = [qi for qi in hrun.order if data.questions[qi].conv != f]
                weights, _ = hrun.choose_weights(rr, f, train_qs)
                chosen_on_heapdb[sid] = weights
                rows.put(k2, fq, hrun.evaluate(rr, fq, config=default.with_weights(**weights)))
            for key in runner.stats:
                runner.stats[key] += hrun.stats[key]
            runner.feedback_log.update(hrun.feedback_log)
        del mem0
        if learn:
            rows.add("heapdb_learned", f"heapdb-memory learned ({mode})", "heapdb",
                     "heapdb-memory", mode, cfgs["learned"].to_dict())
            rows.add("heapdb_learned_norecency", f"heapdb-memory learned ({mode}), w_recency=0",
                     "heapdb", "heapdb-memory", mode, cfgs["learned_norecency"].to_dict())
            for f in folds:
                mem = hd.build(range(len(data.conversations)))
                hd.train(mem, f, mode)
                rows.put("heapdb_learned", fold_qs[f], hd.evaluate(mem, fold_qs[f],
                                                                    cfgs["learned"]))
                rows.put("heapdb_learned_norecency", fold_qs[f],
                         hd.evaluate(mem, fold_qs[f], cfgs["learned_norecency"]))
        heapdb_timer = hd.timer.summary()
        timing["heapdb_s"] = round(time.perf_counter() - t0, 2)
    bar.close()

    timing["total_s"] = round(time.perf_counter() - started, 2)
    st = runner.stats
    timing["heaprank_calls"] = {
        "reranks": int(st["reranks"]),
        "rerank_mean_ms": round(1000 * st["rerank_s"] / max(st["reranks"], 1), 3),
        "feedbacks": int(st["feedbacks"]),
        "feedback_mean_ms": round(1000 * st["feedback_s"] / max(st["feedbacks"], 1), 3)}
    if heapdb_timer is not None:
        timing["heapdb_calls"] = heapdb_timer
    context = {
        "data": data, "prep": prep, "questions": qs, "folds": folds, "kind": kind,
        "mode": mode, "groups": groups, "base_key": base_key, "bm25_key": bm25_key,
        "bm25_lists": bm25_lists, "chosen": chosen, "chosen_on_heapdb": chosen_on_heapdb,
        "chosen_oracle": chosen_oracle, "dev": dev, "grids": grids, "links": links,
        "feedback_log": runner.feedback_log, "timing": None if args.no_timing else timing,
        "path": path, "args": args,
    }
    result, rendered = finish(rows, context)
    text = json.dumps(result, indent=1, sort_keys=False)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text if args.json else rendered)
    return 0
