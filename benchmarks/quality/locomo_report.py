"""Statistics, targets and the printed table of ``python -m benchmarks locomo``."""

from __future__ import annotations

from typing import Any

import numpy as np

from heaprank import __version__

from .harness.answers import ANSWER_MODES
from .harness.metrics import Bootstrap, PerQuestion
from .harness.report import (
    CATEGORY,
    ScoreTable,
    ci_text,
    diff_metrics,
    diff_text,
    git_state,
    rounded,
    row_stats,
    text_table,
)


def _ceiling(prep: Any, questions: list[int], turn_lists: Any, data: Any) -> dict[str, Any]:
    none, all_in, sizes = [], [], []
    cats = []
    for qi in questions:
        q = data.questions[qi]
        got = set(turn_lists[qi].turns.tolist())
        ev = set(q.evidence)
        none.append(not (got & ev))
        all_in.append(ev <= got)
        sizes.append(len(got))
        cats.append(q.category)
    none_a, cats_a = np.array(none), np.array(cats)
    return {
        "no_evidence_share": rounded(none_a.mean()),
        "all_evidence_share": rounded(np.mean(all_in)),
        "mean_candidates": rounded(np.mean(sizes), 2),
        "no_evidence_share_by_category": {str(c): rounded(none_a[cats_a == c].mean())
                                          for c in sorted(set(cats))},
    }


def _targets(by_key: dict[str, Any], per_q: dict[str, Any], boot: Bootstrap, mode: str,
             best_heapdb: str | None, base_key: str, bm25_key: str) -> dict[str, Any]:
    targets: dict[str, Any] = {}
    d = by_key["heaprank_default"]["diff_vs_baseline"]["mrr"]
    targets["default_not_worse_than_retriever"] = {
        "rule": "lower end of the 95% CI of MRR(heaprank defaults, no feedback) - "
                "MRR(retriever) >= -0.005", "diff": d["diff"], "ci": d["ci"],
        "met": d["ci"][0] >= -0.005}
    # The oracle targets are judged in an oracle run, against heapdb-memory's rows learned from
    # the same oracle feedback; a noisy run judges the noisy target.
    oracle_rows = [k for k in ("heaprank_oracle", "heaprank_oracle_grid",
                               "heaprank_oracle_on_heapdb", "heaprank_oracle_grid_on_heapdb")
                   if k in by_key] if mode == "oracle" else []
    if oracle_rows:
        targets["oracle_beats_bm25_by_0.05"] = [
            {"row": k, "rule": "MRR(row) - MRR(BM25 top 50) >= +0.05",
             "diff": by_key[k]["diff_vs_bm25"]["mrr"]["diff"],
             "ci": by_key[k]["diff_vs_bm25"]["mrr"]["ci"],
             "met": by_key[k]["diff_vs_bm25"]["mrr"]["diff"] >= 0.05} for k in oracle_rows]
    if best_heapdb and oracle_rows:
        targets["oracle_beats_heapdb_best"] = []
        for k in oracle_rows:
            c = diff_metrics(boot, per_q[k], per_q[best_heapdb])["mrr"]
            targets["oracle_beats_heapdb_best"].append(
                {"row": k, "heapdb_row": best_heapdb, "rule": "95% CI of the MRR difference "
                 "excludes zero, above it", "diff": c["diff"], "ci": c["ci"],
                 "met": c["ci"][0] > 0})
    if "heaprank_noisy" in by_key and "heaprank_oracle" in by_key:
        ref = by_key["heaprank_default"]["mrr"]
        o, n = by_key["heaprank_oracle"]["mrr"], by_key["heaprank_noisy"]["mrr"]
        b = by_key[bm25_key]["mrr"]
        ratio = (n - ref) / (o - ref) if o != ref else float("nan")
        targets["noisy_keeps_two_thirds"] = {
            "rule": "(MRR noisy - MRR no feedback) / (MRR oracle - MRR no feedback) >= 2/3",
            "ratio": rounded(ratio, 3), "met": bool(ratio >= 2 / 3),
            "ratio_over_bm25": rounded((n - b) / (o - b), 3) if o != b else None}
        if "heaprank_noisy_grid" in by_key and "heaprank_oracle_grid" in by_key:
            # With grid weights the no-feedback reference is the retriever itself (the grid can
            # switch recency and usefulness off).
            g, og = by_key["heaprank_noisy_grid"]["mrr"], by_key["heaprank_oracle_grid"]["mrr"]
            r0 = by_key[base_key]["mrr"]
            targets["noisy_keeps_two_thirds"]["grid_ratio"] = (
                rounded((g - r0) / (og - r0), 3) if og != r0 else None)
            targets["noisy_keeps_two_thirds"]["grid_rule"] = (
                "(MRR noisy grid - MRR retriever) / (MRR oracle grid - MRR retriever)")
    if mode in ANSWER_MODES and f"heaprank_{mode}" in by_key and "heaprank_oracle" in by_key:
        ref = by_key["heaprank_default"]["mrr"]
        o, n = by_key["heaprank_oracle"]["mrr"], by_key[f"heaprank_{mode}"]["mrr"]
        ratio = (n - ref) / (o - ref) if o != ref else float("nan")
        targets["app_feedback_keeps_half"] = {  # issue 34, item 4
            "row": f"heaprank_{mode}", "rule": f"(MRR {mode} - MRR no feedback) / "
            "(MRR oracle - MRR no feedback) >= 1/2", "ratio": rounded(ratio, 3),
            "met": bool(ratio >= 0.5), "oracle_gain": rounded(o - ref, 5)}
    return targets


def finish(rows: ScoreTable, ctx: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The result of a ``locomo`` run (statistics, comparisons, targets, the test split,
    diagnostics) and its printed table."""
    data, qs, args = ctx["data"], ctx["questions"], ctx["args"]
    per_q = rows.per_question()
    boot = Bootstrap(len(qs), resamples=args.resamples, seed=args.seed)
    cats = np.array([data.questions[qi].category for qi in qs])
    base_key, bm25_key, mode = ctx["base_key"], ctx["bm25_key"], ctx["mode"]
    out_rows = row_stats(per_q, rows.meta, boot, cats, base_key, bm25_key, full=True)
    by_key = {r["key"]: r for r in out_rows}
    heapdb = [r for r in out_rows if r["system"] == "heapdb-memory"]
    best_heapdb = max(heapdb, key=lambda r: r["mrr"])["key"] if heapdb else None
    result: dict[str, Any] = {
        "benchmark": "locomo",
        "heaprank_version": __version__,
        "git": git_state(),
        "command": (f"python -m benchmarks locomo --candidates {ctx['kind']} --feedback {mode} "
                    f"--rows {','.join(ctx['groups'])} --seed {args.seed}"),
        "data": {"path": str(ctx["path"]), "conversations": len(data.conversations),
                 "turns": sum(len(c.turns) for c in data.conversations),
                 "questions_total": data.n_questions_total,
                 "questions_usable": len(data.questions)},
        "protocol": _protocol(ctx),
        "n_questions": len(qs),
        "baseline": base_key,
        "bm25_row": bm25_key,
        "rows": out_rows,
        "comparisons": _comparisons(per_q, boot, mode, best_heapdb),
        "targets": _targets(by_key, per_q, boot, mode, best_heapdb, base_key, bm25_key),
        "test_split": _test_split(rows, per_q, cats, ctx, best_heapdb),
        "diagnostics": _diagnostics(ctx, by_key, cats),
    }
    if ctx["timing"] is not None:
        result["timing"] = ctx["timing"]
    return result, render(result)


def _protocol(ctx: dict[str, Any]) -> dict[str, Any]:
    args = ctx["args"]
    return {
        "candidates": ctx["kind"], "feedback": ctx["mode"],
        "folds": [ctx["data"].conversations[f].sample_id for f in ctx["folds"]],
        "shown_k": 10, "eval_k": 50, "now_offset_days": args.now_offset_days,
        "seed": args.seed, "bootstrap_resamples": args.resamples,
        "mrr": "1/rank of the first evidence turn in the full re-ranked candidate list; "
               "0 when no evidence turn is a candidate",
        "recall@k": "share of the question's evidence turns in the top k, averaged",
        "intervals": "95% percentile bootstrap over questions, paired for differences",
    }


def _comparisons(per_q: dict[str, PerQuestion], boot: Bootstrap, mode: str,
                 best_heapdb: str | None) -> list[dict[str, Any]]:
    """Paired differences between heaprank's rows and heapdb-memory's (and noisy vs oracle)."""
    comparisons = []

    def compare(a: str, b: str) -> None:
        if a in per_q and b in per_q:
            comparisons.append({"a": a, "b": b, **diff_metrics(boot, per_q[a], per_q[b])})

    learned = [k for k in (f"heaprank_{mode}", f"heaprank_{mode}_grid", "heaprank_oracle",
                           "heaprank_oracle_grid") if k in per_q and mode != "none"]
    learned = list(dict.fromkeys(learned))
    if best_heapdb:
        for k in learned + ["heaprank_default"]:
            compare(k, best_heapdb)
        compare("heaprank_default", "heapdb_defaults")
        compare(f"heaprank_{mode}", "heapdb_learned")
        compare(f"heaprank_{mode}_on_heapdb", "heapdb_learned")
        compare(f"heaprank_{mode}_grid_on_heapdb", "heapdb_learned_norecency")
        compare(f"heaprank_{mode}_grid_on_heapdb", "heapdb_bm25")
    compare("heaprank_positional_fitted", "heaprank_positional")
    compare("heaprank_positional_true_curve", "heaprank_positional")
    compare("heaprank_positional_true_curve", "heaprank_positional_fitted")
    if mode == "noisy" or mode in ANSWER_MODES:
        compare(f"heaprank_{mode}", "heaprank_oracle")
        compare(f"heaprank_{mode}_grid", "heaprank_oracle_grid")
    return comparisons


def _test_split(rows: ScoreTable, per_q: dict[str, PerQuestion], cats: np.ndarray,
                ctx: dict[str, Any], best_heapdb: str | None) -> dict[str, Any] | None:
    """Every number again without the conversations heaprank's defaults were tuned on (README:
    a development split); None when the run has no such split."""
    data, qs, args = ctx["data"], ctx["questions"], ctx["args"]
    dev = set(ctx["dev"])
    idx = np.array([data.questions[qi].conv not in dev for qi in qs], dtype=bool)
    if not dev or not idx.any() or idx.all():
        return None
    base_key, bm25_key = ctx["base_key"], ctx["bm25_key"]
    sub = {k: pq.subset(idx) for k, pq in per_q.items()}
    sboot = Bootstrap(int(idx.sum()), resamples=args.resamples, seed=args.seed)
    srows = row_stats(sub, rows.meta, sboot, cats[idx], base_key, bm25_key, full=False)
    sby = {r["key"]: r for r in srows}
    return {
        "note": "conversations never used to choose heaprank's defaults (the README's "
                "development split is excluded); the honest held-out view of the defaults",
        "dev_conversations": [data.conversations[c].sample_id for c in sorted(dev)],
        "conversations": sorted({data.conversations[data.questions[qi].conv].sample_id
                                 for qi, keep in zip(qs, idx) if keep}),
        "n_questions": int(idx.sum()),
        "rows": srows,
        "targets": _targets(sby, sub, sboot, ctx["mode"], best_heapdb, base_key, bm25_key),
    }


def _diagnostics(ctx: dict[str, Any], by_key: dict[str, Any], cats: np.ndarray
                 ) -> dict[str, Any]:
    data, qs, prep, mode = ctx["data"], ctx["questions"], ctx["prep"], ctx["mode"]
    diagnostics: dict[str, Any] = {
        "ceiling": {ctx["kind"]: _ceiling(prep, qs, prep.lists, data)},
        "evidence_ids": data.evidence_stats,
        "questions_by_category": {str(c): int((cats == c).sum()) for c in sorted(set(cats))},
    }
    if ctx["kind"] != "bm25":
        diagnostics["ceiling"]["bm25"] = _ceiling(prep, qs, ctx["bm25_lists"], data)
    if ctx["chosen"]:
        diagnostics["chosen_weights"] = ctx["chosen"]
        if ctx["chosen_on_heapdb"]:
            diagnostics["chosen_weights_on_heapdb"] = ctx["chosen_on_heapdb"]
        if ctx["chosen_oracle"]:
            diagnostics["chosen_weights_oracle"] = ctx["chosen_oracle"]
        diagnostics["grid_top5_train_mrr"] = {
            k: [{"weights": t["weights"], "train_mrr": rounded(t["train_mrr"])} for t in v]
            for k, v in ctx["grids"].items()}
    if ctx["links"]:
        diagnostics["links"] = ctx["links"]
        diagnostics["links_note"] = ("top 10 pooled links by P(useful) with n >= 20, "
                                     "Reranker.links('*') after each fold's training")
    rec = {}
    for label, keys in (("no feedback", ("heaprank_default", "nofb_norecency", "nofb_30d")),
                        (mode, (f"heaprank_{mode}", f"heaprank_{mode}_norecency",
                                f"heaprank_{mode}_30d"))):
        vals = {name: by_key[k]["mrr"] for name, k in zip(
            ("+1d default", "+1d recency off", "+30d default"), keys) if k in by_key}
        if len(vals) > 1:
            rec[label] = vals
    if rec:
        diagnostics["recency_mrr"] = rec
    if ctx["feedback_log"]:
        diagnostics["feedback_log"] = ctx["feedback_log"]
    if ctx.get("curves"):
        from .harness.runner import examination_truth

        diagnostics["examination"] = {"true": [round(t, 4) for t in examination_truth()],
                                      "fitted_by_fold": ctx["curves"]}
    if ctx.get("attribution"):
        diagnostics["attribution"] = ctx["attribution"]
    return diagnostics


def render(res: dict[str, Any]) -> str:
    """The printed table of a ``locomo`` result."""
    p = res["protocol"]
    out = [f"LoCoMo evidence retrieval: candidates {p['candidates']}, feedback {p['feedback']}, "
           f"{res['n_questions']} questions, {len(p['folds'])} held-out conversations, "
           f"seed {p['seed']}",
           f"data {res['data']['path']}: {res['data']['conversations']} conversations, "
           f"{res['data']['turns']} turns, {res['data']['questions_usable']} of "
           f"{res['data']['questions_total']} questions usable", ""]
    out += _group_tables(res) + _test_split_table(res) + _category_table(res)
    out += _diagnostic_lines(res["diagnostics"]) + [""]
    if res["comparisons"]:
        out.append("paired differences (MRR, R@5, R@10):")
        for c in res["comparisons"]:
            out.append(f"  {c['a']} - {c['b']}: MRR {diff_text(c['mrr'])}, "
                       f"R@5 {diff_text(c['recall@5'])}, R@10 {diff_text(c['recall@10'])}")
        out.append("")
    blocks = [("targets (all conversations):", res["targets"])]
    if res.get("test_split"):
        blocks.append(("targets (test split):", res["test_split"]["targets"]))
    for title, targets in blocks:
        out.append(title)
        out += _target_lines(targets)
    if "timing" in res:
        t = res["timing"]
        out += ["", "timing: " + ", ".join(f"{k} {v}" for k, v in t.items()
                                           if not isinstance(v, dict))]
        for k, v in t.items():
            if isinstance(v, dict):
                out.append(f"  {k}: " + ", ".join(f"{a} {b}" for a, b in v.items()))
    return "\n".join(out)


def _labels(res: dict[str, Any]) -> tuple[str, str, bool]:
    """The retriever's and BM25's row labels, and whether they are two rows."""
    rows = res["rows"]
    base_label = next(r["label"] for r in rows if r["key"] == res["baseline"])
    bm25_label = next(r["label"] for r in rows if r["key"] == res["bm25_row"])
    return base_label, bm25_label, res["baseline"] != res["bm25_row"]


def _group_tables(res: dict[str, Any]) -> list[str]:
    base_label, bm25_label, two = _labels(res)
    out = []
    for group, title in (("core", "Main rows"), ("heapdb", "heapdb-memory 0.1.0, same protocol"),
                         ("diagnostics", "Diagnostics"), ("ablations", "Ablations")):
        body = []
        for r in res["rows"]:
            if r["group"] != group:
                continue
            cells = [r["label"], f"{r['mrr']:.3f}", ci_text(r["mrr_ci"]), f"{r['recall@5']:.3f}",
                     f"{r['recall@10']:.3f}", diff_text(r["diff_vs_baseline"]["mrr"]),
                     diff_text(r["diff_vs_baseline"]["recall@10"])]
            if two:
                cells.append(diff_text(r["diff_vs_bm25"]["mrr"]))
            body.append(cells)
        if not body:
            continue
        header = ["row", "MRR", "95% CI", "R@5", "R@10", f"dMRR vs {base_label}", "dR@10"]
        if two:
            header.append(f"dMRR vs {bm25_label}")
        out += [f"{title}:"] + text_table(header, body, {1, 3, 4}) + [""]
    return out


def _test_split_table(res: dict[str, Any]) -> list[str]:
    ts = res.get("test_split")
    if not ts:
        return []
    base_label, bm25_label, two = _labels(res)
    label_of = {r["key"]: r["label"] for r in res["rows"]}
    group_of = {r["key"]: r["group"] for r in res["rows"]}
    body = [[label_of[r["key"]], f"{r['mrr']:.3f}", ci_text(r["mrr_ci"]), f"{r['recall@5']:.3f}",
             f"{r['recall@10']:.3f}", diff_text(r["diff_vs_baseline"]["mrr"])]
            + ([diff_text(r["diff_vs_bm25"]["mrr"])] if two else [])
            for r in ts["rows"] if group_of[r["key"]] in ("core", "heapdb")]
    header = ["row", "MRR", "95% CI", "R@5", "R@10", f"dMRR vs {base_label}"]
    return ([f"Test split: {', '.join(ts['conversations'])}, {ts['n_questions']} questions "
             f"(heaprank's defaults were chosen on {', '.join(ts['dev_conversations'])}):"]
            + text_table(header + ([f"dMRR vs {bm25_label}"] if two else []), body, {1, 3, 4})
            + [""])


def _category_table(res: dict[str, Any]) -> list[str]:
    counts = res["diagnostics"]["questions_by_category"]
    cats = sorted(counts)
    body = [[r["label"]] + [f"{r['per_category'][c]['mrr']:.3f}" for c in cats]
            for r in res["rows"] if r["group"] in ("core", "heapdb")]
    header = ["MRR by category"] + [f"{c} {CATEGORY.get(c, '')} (n {counts[c]})" for c in cats]
    return text_table(header, body, set(range(1, len(cats) + 1))) + [""]


def _diagnostic_lines(diag: dict[str, Any]) -> list[str]:
    out = []
    for name, c in diag["ceiling"].items():
        out.append(f"ceiling ({name}): {c['no_evidence_share']:.1%} of questions have no evidence "
                   f"turn among the candidates, {c['all_evidence_share']:.1%} have all "
                   f"(mean {c['mean_candidates']:.1f} candidates)")
    out.append("evidence ids: " + ", ".join(f"{k} {v}" for k, v in diag["evidence_ids"].items()))
    if "recency_mrr" in diag:
        out.append("recency (MRR): " + "; ".join(
            f"{k}: " + ", ".join(f"{n} {v:.3f}" for n, v in vals.items())
            for k, vals in diag["recency_mrr"].items()))
    if "chosen_weights" in diag:
        out.append("grid weights chosen on training conversations (usefulness, recency):")
        out.append("  " + ", ".join(f"{k} ({w['usefulness']:g}, {w['recency']:g})"
                                    for k, w in diag["chosen_weights"].items()))
    if "links" in diag:
        first, links = next(iter(diag["links"].items()))
        out.append(f"learned pooled links, fold {first} held out (n >= 20):")
        body = [[lk["feature"], f"{lk['p']:.4f}", f"{lk['n']:.0f}",
                 f"[{lk['low']:.4f}, {lk['high']:.4f}]"] for lk in links]
        out += ["  " + s for s in text_table(["feature", "P(useful)", "n", "90% interval"], body,
                                             {1, 2})]
    if "examination" in diag:
        exam = diag["examination"]
        out.append("examination curve, ranks 1-10 (true, then the reject weights each fold's "
                   "fitted reranker ended with):")
        out.append("  true   " + " ".join(f"{t:.3f}" for t in exam["true"]))
        for sid, c in exam["fitted_by_fold"].items():
            n = len(exam["true"])
            err = max(abs(a - b) for a, b in zip(c["weights"][:n], exam["true"]))
            out.append(f"  {sid:<6} " + " ".join(f"{w:.3f}" for w in c["weights"][:n])
                       + f"  ({c['curve']}, {c['impressions']} impressions, max |error| "
                       f"{err:.3f})")
    for k, v in diag.get("feedback_log", {}).items():
        out.append(f"feedback ({k}): {v['feedbacks']} feedbacks, {v['with_citation']} with a "
                   f"citation, evidence shown in {v['evidence_shown']}, "
                   f"{v['false_citations']} false citations")
    for k, a in diag.get("attribution", {}).items():
        out.append(f"attribution ({k}): {a['answers']} answers, {a['attributed_share']:.1%} "
                   f"attributed ({a['abstained']} abstained: no feedback), evidence found for "
                   f"{a['found_share']:.1%} of the {a['with_evidence']} with evidence shown; "
                   f"precision {a['precision']:.3f}, recall {a['recall']:.3f}")
    return out


def _target_lines(targets: dict[str, Any]) -> list[str]:
    out = []
    for name, t in targets.items():
        for item in t if isinstance(t, list) else [t]:
            verdict = "MET" if item["met"] else "NOT MET"
            detail = (f"ratio {item['ratio']:.3f}" + (
                f" (grid weights: {item['grid_ratio']:.3f})" if item.get("grid_ratio")
                is not None else "") if "ratio" in item
                      else f"{item['diff']:+.3f} {ci_text(item['ci'])}")
            row = f" ({item['row']})" if "row" in item else ""
            out.append(f"  {name}{row}: {detail} -> {verdict}")
    return out
