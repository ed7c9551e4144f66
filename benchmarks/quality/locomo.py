"""``python -m benchmarks locomo``: LoCoMo evidence retrieval, heaprank beside its retriever and
beside heapdb-memory 0.1.0, leave-one-conversation-out (docs/design.md, "Evaluation").

One command runs one candidate set (``--candidates``) with one kind of feedback
(``--feedback``) and every row that goes with it:

- ``core``: the retriever alone; heaprank with default weights and no feedback; heaprank after
  feedback from the other nine conversations, with default weights and with weights chosen by a
  grid on the training conversations only (``--feedback noisy``, ``answer``,
  ``answer-restated`` or ``cites`` adds the oracle rows as the reference its gain is measured
  against; ``--feedback positional`` adds heaprank with ``learning.reject_discount="fitted"``, its fitted
  examination curve printed beside the true one);
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
import sys
import time
from pathlib import Path
from typing import Any, Literal

from . import locomo_first_stage
from .harness.answers import ANSWER_MODES
from .harness.options import (
    DEV_CONVERSATIONS,
    RETRIEVER_LABEL,
    add_shared,
    data_path,
    dev_conversations,
    emit,
)
from .harness.options import folds as parse_folds
from .harness.report import ScoreTable

ROW_GROUPS = ("core", "heapdb", "diagnostics", "ablations")
#: The feedback modes judged against oracle rows of the same run.
REFERENCED = ("noisy", *ANSWER_MODES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, "data")
    parser.add_argument("--candidates", choices=("bm25", "dense", "union"), default="bm25",
                        help="candidate retriever (default bm25)")
    parser.add_argument("--feedback", choices=("oracle", "noisy", "positional", "none",
                                               *ANSWER_MODES),
                        default="oracle", help="feedback the other conversations give (default "
                        "oracle; positional: the reader examines rank r with p 1/r, and heaprank "
                        "runs with the fixed and the fitted reject curve side by side; answer, "
                        "answer-restated: the gold answer attributed by heaprank's attribution; "
                        "cites: a position-biased citing model, benchmarks/quality/harness/"
                        "answers.py; with --first-stage, one more row beside oracle and noisy)")
    parser.add_argument("--rows", default=",".join(ROW_GROUPS),
                        help=f"row groups, comma-separated (default all: {','.join(ROW_GROUPS)})")
    parser.add_argument("--folds", help="held-out conversations to evaluate (indices or "
                        "sample ids, comma-separated; default all)")
    parser.add_argument("--dev-conversations", default=DEV_CONVERSATIONS,
                        help="conversations heaprank's defaults were chosen on (README: 0-4); "
                        "every number is repeated without them ('none' to skip)")
    add_shared(parser, "seed", "now-offset-days", "conversations", "questions-limit",
               "resamples", "json", "out", "no-progress", "no-timing")
    locomo_first_stage.add_arguments(parser)


def _heaprank_config(cfg: Any, **extra: Any) -> dict[str, Any]:
    out = cfg.to_dict()
    out.update(extra)
    return out


def run(args: argparse.Namespace) -> int:
    from .harness.data import load_locomo

    started = time.perf_counter()
    try:
        path = data_path(args.data)
    except FileNotFoundError as exc:
        print(f"python -m benchmarks locomo: {exc}", file=sys.stderr)
        return 2
    if args.summarize:
        print(locomo_first_stage.summarize(args.summarize))
        return 0
    if args.first_stage:
        return locomo_first_stage.run(args, path)
    groups = [g.strip() for g in args.rows.split(",") if g.strip()]
    unknown = set(groups) - set(ROW_GROUPS)
    if unknown:
        print(f"python -m benchmarks locomo: --rows: unknown group(s) {sorted(unknown)}; "
              f"choose from {', '.join(ROW_GROUPS)}", file=sys.stderr)
        return 2
    if args.feedback in ANSWER_MODES and "heapdb" in groups:
        print(f"python -m benchmarks locomo: --feedback {args.feedback}: heapdb-memory's rows "
              "take oracle or noisy feedback only; pass --rows without heapdb", file=sys.stderr)
        return 2
    data = load_locomo(path, conversations=args.conversations,
                       questions_per_conversation=args.questions_limit)
    if len(data.conversations) < 2:
        print("python -m benchmarks locomo: leave-one-conversation-out needs at least 2 conversations",
              file=sys.stderr)
        return 2
    result, rendered = LocomoRun(args, path, data, groups).rows(started)
    emit(result, rendered, args)
    return 0


class LocomoRun:
    """One ``locomo`` run: its candidates, the score table, and the rows of each group, filled
    in a fixed order (every reranker is seeded, so the same command prints the same numbers)."""

    def __init__(self, args: argparse.Namespace, path: Path, data: Any, groups: list[str]) -> None:
        from tqdm import tqdm

        from heaprank.config import Config

        from .harness.data import BM25Scorer, DenseScorer, build_candidates
        from .harness.runner import HeaprankRunner, eval_questions, prepare

        self.args, self.path, self.data, self.groups = args, path, data, groups
        self.folds = parse_folds(args.folds, data)
        self.dev = dev_conversations(args.dev_conversations, data)
        self.kind, self.mode = args.candidates, args.feedback
        self.timing: dict[str, Any] = {}
        t0 = time.perf_counter()
        bm25 = BM25Scorer(data)
        self.dense = DenseScorer(data, progress=False) if self.kind in ("dense", "union") else None
        lists = build_candidates(data, self.kind, bm25=bm25, dense=self.dense)
        self.bm25_lists = lists if self.kind == "bm25" else build_candidates(data, "bm25", bm25=bm25)
        self.prep = prepare(data, lists, args.now_offset_days, unique_ids="ablations" in groups)
        self.timing["candidates_s"] = round(time.perf_counter() - t0, 2)
        self.qs = eval_questions(data, self.folds)
        self.table = ScoreTable(self.qs)
        self.fold_qs = {f: [qi for qi in self.qs if data.questions[qi].conv == f]
                        for f in self.folds}
        self.default = Config()
        self.bar = tqdm(total=self._progress_total(), disable=args.no_progress, file=sys.stderr,
                        unit="q", desc=f"locomo {self.kind}/{self.mode}", mininterval=0.5,
                        dynamic_ncols=True)
        self.runner = HeaprankRunner(self.prep, seed=args.seed, tick=self.bar.update)
        self.chosen: dict[str, Any] = {}
        self.chosen_on_heapdb: dict[str, Any] = {}
        self.chosen_oracle: dict[str, Any] = {}
        self.grids: dict[str, Any] = {}
        self.links: dict[str, Any] = {}
        self.curves: dict[str, Any] = {}
        self.heapdb_timer: dict[str, float] | None = None

    def _progress_total(self) -> int:
        """The progress bar's total, from the plan (one tick per rerank or recall)."""
        data, folds, qs = self.data, self.folds, self.qs
        n_train = {f: sum(q.conv != f for q in data.questions) for f in folds}
        core, diag, abl = ("core" in self.groups), ("diagnostics" in self.groups), \
            ("ablations" in self.groups)
        learn, noisy = self.mode != "none", self.mode in REFERENCED
        fitted = self.mode == "positional"
        total = len(qs) * (1 + diag * 2)
        if learn:
            total += sum(n_train[f] for f in folds) * (1 + core + 2 * (noisy and core) + abl * 3
                                                       + 2 * fitted)
            total += len(qs) * (1 + core * (1 + 2 * noisy) + (diag or abl) + diag + abl * 6
                                + 2 * fitted)
        if "heapdb" in self.groups:
            total += 2 * len(qs) + (sum(n_train[f] for f in folds) + 2 * len(qs)) * learn
            total += (sum(n_train[f] for f in folds) * 2 + 2 * len(qs)) * (learn and core)
        return total

    def rows(self, started: float) -> tuple[dict[str, Any], str]:
        """Every row of the run's groups, then the result and its table."""
        self.base_key, self.bm25_key = self._retriever_rows()
        t0 = time.perf_counter()
        self._day_one_rows()
        if self.mode != "none":
            self._feedback_rows()
        self.timing["heaprank_s"] = round(time.perf_counter() - t0, 2)
        if "heapdb" in self.groups:
            t0 = time.perf_counter()
            self._heapdb_rows()
            self.timing["heapdb_s"] = round(time.perf_counter() - t0, 2)
        self.bar.close()
        self.timing["total_s"] = round(time.perf_counter() - started, 2)
        return self._finish()

    def _retriever_rows(self) -> tuple[str, str]:
        """The retriever alone (and BM25 alone beside dense or union candidates)."""
        from .harness.metrics import score_ranking

        data, prep, qs, table = self.data, self.prep, self.qs, self.table
        base_cfg = {"retriever": self.kind, "top_n": 50, "bm25": "bm25s lucene k1=1.2 b=0.75, "
                    "stopwords + light stemming", "dense": "all-MiniLM-L6-v2 cosine",
                    "union_score": "mean of min-max BM25 and min-max cosine over the union"}
        table.add("baseline", RETRIEVER_LABEL[self.kind], "core", "retriever", "none", base_cfg)
        table.put("baseline", qs, [prep.retriever_score(qi) for qi in qs])
        if self.kind == "bm25":
            return "baseline", "baseline"
        table.add("bm25", RETRIEVER_LABEL["bm25"], "core", "retriever", "none",
                  {"retriever": "bm25", "top_n": 50})
        table.put("bm25", qs, [score_ranking(
            [data.conversations[data.questions[qi].conv].turns[t].id
             for t in self.bm25_lists[qi].turns.tolist()], prep.evidence[qi]) for qi in qs])
        return "baseline", "bm25"

    def _day_one_rows(self) -> None:
        """heaprank with no feedback (and, as diagnostics, recency off and asked +30 days)."""
        from heaprank.reranker import Reranker

        table, qs, runner, default = self.table, self.qs, self.runner, self.default
        rr0 = Reranker(config=default)
        table.add("heaprank_default", "heaprank defaults, no feedback", "core", "heaprank", "none",
                  _heaprank_config(default))
        table.put("heaprank_default", qs, runner.evaluate(rr0, qs))
        if "diagnostics" in self.groups:
            norec = default.with_weights(recency=0.0)
            table.add("nofb_norecency", "heaprank no feedback, recency off", "diagnostics",
                      "heaprank", "none", _heaprank_config(norec))
            table.put("nofb_norecency", qs, runner.evaluate(rr0, qs, config=norec))
            table.add("nofb_30d", "heaprank no feedback, asked +30 days", "diagnostics",
                      "heaprank", "none", _heaprank_config(default, eval_offset_days=30.0))
            table.put("nofb_30d", qs, runner.evaluate(rr0, qs, offset_days=30.0))

    def _feedback_rows(self) -> None:
        """heaprank after feedback from the other conversations, fold by fold."""
        from .harness.runner import top_links

        mode, default, table = self.mode, self.default, self.table
        main = f"heaprank_{mode}"
        table.add(main, f"heaprank + {mode} feedback", "core", "heaprank", mode,
                  _heaprank_config(default))
        if mode in REFERENCED and "core" in self.groups:
            table.add("heaprank_oracle", "heaprank + oracle feedback (reference)", "core",
                      "heaprank", "oracle", _heaprank_config(default))
            table.add("heaprank_oracle_grid", "heaprank + oracle, grid weights (reference)",
                      "core", "heaprank", "oracle", _heaprank_config(
                          default, weights="chosen per fold on training conversations, see "
                          "diagnostics.chosen_weights_oracle"))
        for f in self.folds:
            sid, fq = self.data.conversations[f].sample_id, self.fold_qs[f]
            rr = self.runner.train(f, default, mode)
            table.put(main, fq, self.runner.evaluate(rr, fq))
            self.links[sid] = top_links(rr)
            if mode == "positional":
                self._fitted_row(f)
            if "core" in self.groups:
                self._grid_rows(f, rr)
            if "diagnostics" in self.groups or "ablations" in self.groups:
                norec = default.with_weights(recency=0.0)
                table.add(f"{main}_norecency", f"heaprank + {mode}, recency off",
                          "diagnostics", "heaprank", mode, _heaprank_config(norec))
                table.put(f"{main}_norecency", fq, self.runner.evaluate(rr, fq, config=norec))
            if "diagnostics" in self.groups:
                table.add(f"{main}_30d", f"heaprank + {mode}, asked +30 days", "diagnostics",
                          "heaprank", mode, _heaprank_config(default, eval_offset_days=30.0))
                table.put(f"{main}_30d", fq, self.runner.evaluate(rr, fq, offset_days=30.0))
            if "ablations" in self.groups:
                self._ablation_rows(f, rr)

    def _fitted_row(self, f: int) -> None:
        """Fold ``f``, positional feedback: heaprank with the reject curve fitted on its own
        impression log (``learning.reject_discount="fitted"``), and the curve it ended with."""
        from .harness.runner import examination_truth

        cfg = self.default.with_changes(learning={"reject_discount": "fitted"})
        key = "heaprank_positional_fitted"
        self.table.add(key, "heaprank + positional, fitted reject curve", "core", "heaprank",
                       "positional", _heaprank_config(cfg))
        rr = self.runner.train(f, cfg, "positional", label="positional_fitted")
        self.table.put(key, self.fold_qs[f], self.runner.evaluate(rr, self.fold_qs[f]))
        self.curves[self.data.conversations[f].sample_id] = rr.stats()["reject_weights"]
        # the reference: the true curve held from the first feedback (never re-fitted)
        cfg = cfg.with_changes(refit={"reject_impressions": 10**9})
        key = "heaprank_positional_true_curve"
        self.table.add(key, "heaprank + positional, true curve 1/r (reference)", "core",
                       "heaprank", "positional", _heaprank_config(cfg, reject_curve="1/r"))
        rr = self.runner.train(f, cfg, "positional", label="positional_true_curve",
                               curve=examination_truth())
        self.table.put(key, self.fold_qs[f], self.runner.evaluate(rr, self.fold_qs[f]))

    def _grid_rows(self, f: int, rr: Any) -> None:
        """Fold ``f``: weights chosen by the grid on the training conversations; with noisy
        feedback, the oracle references too."""
        data, mode, default, table, runner = self.data, self.mode, self.default, self.table, \
            self.runner
        sid, fq, main = data.conversations[f].sample_id, self.fold_qs[f], f"heaprank_{mode}"
        train_qs = [qi for qi in runner.order if data.questions[qi].conv != f]
        weights, grid = runner.choose_weights(rr, f, train_qs)
        self.chosen[sid] = weights
        self.grids[sid] = sorted(grid, key=lambda r: -r["train_mrr"])[:5]
        table.add(f"{main}_grid", f"heaprank + {mode}, grid weights (train only)", "core",
                  "heaprank", mode, _heaprank_config(
                      default, weights="chosen per fold on training conversations, "
                      "see diagnostics.chosen_weights"))
        table.put(f"{main}_grid", fq, runner.evaluate(rr, fq, config=default.with_weights(
            **weights)))
        if mode in REFERENCED:
            oracle = runner.train(f, default, "oracle")
            table.put("heaprank_oracle", fq, runner.evaluate(oracle, fq))
            weights, _ = runner.choose_weights(oracle, f, train_qs)
            self.chosen_oracle[sid] = weights
            table.put("heaprank_oracle_grid", fq, runner.evaluate(
                oracle, fq, config=default.with_weights(**weights)))

    def _ablation_rows(self, f: int, rr: Any) -> None:
        """Fold ``f``: each signal off, then each learning option flipped against the default."""
        from heaprank.config import SIGNALS

        mode, default, table, runner, fq = self.mode, self.default, self.table, self.runner, \
            self.fold_qs[f]
        for signal in SIGNALS:
            if signal == "recency" or getattr(default.weights, signal) == 0:
                continue  # the diagnostics row f"heaprank_{mode}_norecency"; off already
            cfg = default.with_weights(**{signal: 0.0})
            key = f"abl_no_{signal}"
            table.add(key, f"ablation: {signal} off ({mode})", "ablations", "heaprank", mode,
                      _heaprank_config(cfg))
            table.put(key, fq, runner.evaluate(rr, fq, config=cfg))
        other: Literal["none", "log"] = "none" if default.learning.reject_discount == "log" else "log"
        for key, label, cfg, unique in (
                ("abl_credit", "EM credit" if not default.learning.em_credit else "uniform credit",
                 default.with_changes(learning={"em_credit": not default.learning.em_credit}), False),
                ("abl_doc_links", ("without" if default.features.doc_features else "with") + " doc: links",
                 default.with_changes(features={"doc_features": not default.features.doc_features}), True),
                ("abl_reject_discount", f"reject discount {other!r}",
                 default.with_changes(learning={"reject_discount": other}), False)):
            table.add(key, f"ablation: {label} ({mode})", "ablations", "heaprank", mode,
                      _heaprank_config(cfg))
            variant = runner.train(f, cfg, mode, unique=unique, label=key)
            table.put(key, fq, runner.evaluate(variant, fq, unique=unique))

    def _heapdb_rows(self) -> None:
        """heapdb-memory under the same protocol (its BM25, or hybrid beside dense candidates)."""
        from . import heapdb_ref

        data, mode, table, qs, dense = self.data, self.mode, self.table, self.qs, self.dense
        embedder = None
        if dense is not None:
            texts = {}
            for ci, conv in enumerate(data.conversations):
                for t in conv.turns:
                    texts[t.text] = dense.turns[ci][t.index]
            for q in data.questions:
                texts[q.text] = dense.questions[q.index]
            embedder = heapdb_ref.CachedEmbedder(texts, dense.encode)
        what = "hybrid (BM25 + MiniLM)" if dense is not None else "BM25"
        hd = heapdb_ref.HeapdbRunner(data, self.prep.times, seed=self.args.seed,
                                     order=self.runner.order, embedder=embedder,
                                     tick=self.bar.update)
        cfgs = heapdb_ref.configs()
        mem0 = hd.build(range(len(data.conversations)))
        table.add("heapdb_bm25", f"heapdb-memory {what} relevance only", "heapdb",
                  "heapdb-memory", "none", cfgs["bm25"].to_dict())
        table.put("heapdb_bm25", qs, hd.evaluate(mem0, qs, cfgs["bm25"]))
        table.add("heapdb_defaults", "heapdb-memory defaults, no feedback", "heapdb",
                  "heapdb-memory", "none", cfgs["defaults"].to_dict())
        table.put("heapdb_defaults", qs, hd.evaluate(mem0, qs, cfgs["defaults"]))
        if mode != "none" and "core" in self.groups:
            self._heaprank_on_heapdb(heapdb_ref.candidate_lists(mem0, data, self.prep.times,
                                                                cfgs["bm25"]))
        del mem0
        if mode != "none":
            table.add("heapdb_learned", f"heapdb-memory learned ({mode})", "heapdb",
                      "heapdb-memory", mode, cfgs["learned"].to_dict())
            table.add("heapdb_learned_norecency", f"heapdb-memory learned ({mode}), w_recency=0",
                      "heapdb", "heapdb-memory", mode, cfgs["learned_norecency"].to_dict())
            for f in self.folds:
                mem = hd.build(range(len(data.conversations)))
                hd.train(mem, f, mode)
                fq = self.fold_qs[f]
                table.put("heapdb_learned", fq, hd.evaluate(mem, fq, cfgs["learned"]))
                table.put("heapdb_learned_norecency", fq,
                          hd.evaluate(mem, fq, cfgs["learned_norecency"]))
        self.heapdb_timer = hd.timer.summary()

    def _heaprank_on_heapdb(self, lists: list[Any]) -> None:
        """heaprank re-ranking heapdb-memory's own candidates: the same lists, the same
        feedback, so the comparison is re-ranking against re-ranking."""
        from .harness.runner import HeaprankRunner, prepare

        data, mode, default, table = self.data, self.mode, self.default, self.table
        hrun = HeaprankRunner(prepare(data, lists, self.args.now_offset_days),
                              seed=self.args.seed, tick=self.bar.update)
        k1, k2 = f"heaprank_{mode}_on_heapdb", f"heaprank_{mode}_grid_on_heapdb"
        on = "heapdb-memory's relevance-only recall (its candidates, its relevance score)"
        table.add(k1, f"heaprank + {mode} on heapdb-memory's candidates", "heapdb",
                  "heaprank", mode, _heaprank_config(default, candidates=on))
        table.add(k2, f"heaprank + {mode}, grid, on heapdb-memory's candidates", "heapdb",
                  "heaprank", mode, _heaprank_config(default, candidates=on, weights=(
                      "chosen per fold on training conversations, see "
                      "diagnostics.chosen_weights_on_heapdb")))
        for f in self.folds:
            sid, fq = data.conversations[f].sample_id, self.fold_qs[f]
            rr = hrun.train(f, default, mode, label=f"{mode}_on_heapdb")
            table.put(k1, fq, hrun.evaluate(rr, fq))
            train_qs = [qi for qi in hrun.order if data.questions[qi].conv != f]
            weights, _ = hrun.choose_weights(rr, f, train_qs)
            self.chosen_on_heapdb[sid] = weights
            table.put(k2, fq, hrun.evaluate(rr, fq, config=default.with_weights(**weights)))
        for key in self.runner.stats:
            self.runner.stats[key] += hrun.stats[key]
        self.runner.feedback_log.update(hrun.feedback_log)

    def _finish(self) -> tuple[dict[str, Any], str]:
        from .locomo_report import finish

        st = self.runner.stats
        self.timing["heaprank_calls"] = {
            "reranks": int(st["reranks"]),
            "rerank_mean_ms": round(1000 * st["rerank_s"] / max(st["reranks"], 1), 3),
            "feedbacks": int(st["feedbacks"]),
            "feedback_mean_ms": round(1000 * st["feedback_s"] / max(st["feedbacks"], 1), 3)}
        if self.heapdb_timer is not None:
            self.timing["heapdb_calls"] = self.heapdb_timer
        return finish(self.table, {
            "data": self.data, "prep": self.prep, "questions": self.qs, "folds": self.folds,
            "kind": self.kind, "mode": self.mode, "groups": self.groups,
            "base_key": self.base_key, "bm25_key": self.bm25_key, "bm25_lists": self.bm25_lists,
            "chosen": self.chosen, "chosen_on_heapdb": self.chosen_on_heapdb,
            "chosen_oracle": self.chosen_oracle, "dev": self.dev, "grids": self.grids,
            "links": self.links, "feedback_log": self.runner.feedback_log, "curves": self.curves,
            "attribution": self.runner.attribution_log,
            "timing": None if self.args.no_timing else self.timing,
            "path": self.path, "args": self.args})
