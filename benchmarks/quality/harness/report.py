"""A run's per-question scores, its rows' statistics and the text tables the commands print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import git
from .metrics import Bootstrap, PerQuestion, Score, collect

METRICS = ("mrr", "recall@1", "recall@5", "recall@10")
DIFF_METRICS = ("mrr", "recall@5", "recall@10")
#: LoCoMo's categories as the released file numbers them.
CATEGORY = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop",
            "5": "adversarial"}


class ScoreTable:
    """Per-question scores of every row of a run, filled fold by fold."""

    def __init__(self, questions: Sequence[int]) -> None:
        self.questions = list(questions)
        self.where = {qi: i for i, qi in enumerate(self.questions)}
        self.scores: dict[str, list[Any]] = {}
        self.meta: dict[str, dict[str, Any]] = {}

    def add(self, key: str, label: str, group: str, system: str, feedback: str,
            config: dict[str, Any]) -> None:
        """Declare a row (once: a later call with the same key is ignored)."""
        if key not in self.scores:
            self.scores[key] = [None] * len(self.questions)
            self.meta[key] = {"label": label, "group": group, "system": system,
                              "feedback": feedback, "config": config}

    def put(self, key: str, questions: Sequence[int], scores: Sequence[Score]) -> None:
        row = self.scores[key]
        for qi, s in zip(questions, scores):
            row[self.where[qi]] = s

    def per_question(self) -> dict[str, PerQuestion]:
        """Every row's metric arrays; a row with a question left unscored is an error."""
        for key, scores in self.scores.items():
            missing = sum(s is None for s in scores)
            if missing:
                raise RuntimeError(f"row {key!r}: {missing} questions were not evaluated")
        return {key: collect(scores) for key, scores in self.scores.items()}


def rounded(x: Any, nd: int = 5) -> float:
    return float(round(float(x), nd))


def diff_metrics(boot: Bootstrap, a: PerQuestion, b: PerQuestion) -> dict[str, Any]:
    """``a - b`` on each of :data:`DIFF_METRICS`, with its paired interval."""
    out = {}
    for m in DIFF_METRICS:
        d = boot.diff(a.metric(m), b.metric(m))
        out[m] = {"diff": rounded(d["diff"]), "ci": [rounded(x) for x in d["ci"]]}
    return out


def group_stats(pq: PerQuestion, base: PerQuestion, groups: np.ndarray,
                resamples: int) -> dict[str, dict[str, Any]]:
    """A row's metrics on each group of questions (a LoCoMo category, a question type), with
    its paired MRR difference to ``base`` on the group and that difference's interval."""
    out = {}
    for g in sorted(set(groups.tolist())):
        mask = groups == g
        d = Bootstrap(int(mask.sum()), resamples=resamples).diff(pq.rr[mask], base.rr[mask])
        out[str(g)] = {"n": int(mask.sum()),
                       **{m: rounded(pq.metric(m)[mask].mean()) for m in DIFF_METRICS},
                       "dmrr_vs_baseline": {"diff": rounded(d["diff"]),
                                            "ci": [rounded(x) for x in d["ci"]]}}
    return out


def row_stats(per_q: dict[str, PerQuestion], meta: dict[str, dict[str, Any]], boot: Bootstrap,
              cats: np.ndarray, base_key: str, bm25_key: str, full: bool,
              qtypes: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Metrics, intervals and differences of every row on one set of questions (with
    ``full``, also by LoCoMo category and, given ``qtypes``, by heaprank's question type)."""
    base, bm25 = per_q[base_key], per_q[bm25_key]
    out = []
    for key, pq in per_q.items():
        row: dict[str, Any] = {"key": key}
        if full:
            row.update({k: meta[key][k] for k in ("label", "group", "system", "feedback")})
        row["n_questions"] = len(pq.rr)
        for m in METRICS:
            row[m] = rounded(pq.metric(m).mean())
            if m != "recall@1":
                row[f"{m}_ci"] = [rounded(x) for x in boot.interval(pq.metric(m))]
        row["diff_vs_baseline"] = diff_metrics(boot, pq, base)
        row["diff_vs_bm25"] = diff_metrics(boot, pq, bm25)
        if full:
            row["per_category"] = group_stats(pq, base, cats, len(boot.idx))
            if qtypes is not None:
                row["per_qtype"] = group_stats(pq, base, qtypes, len(boot.idx))
            row["config"] = meta[key]["config"]
        out.append(row)
    return out


def git_state() -> dict[str, Any] | None:
    """The commit of the heaprank checkout and whether its tracked files differ from it."""
    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    return {"commit": commit, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def ci_text(ci: Sequence[float], nd: int = 3) -> str:
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


def diff_text(d: dict[str, Any]) -> str:
    return f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]"


def text_table(header: list[str], body: list[list[str]], right: set[int]) -> list[str]:
    """The lines of an aligned table (a rule under the header); columns in ``right`` are
    right-aligned."""
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in body]


def mrr_rows(rows: dict[str, np.ndarray], groups: dict[str, np.ndarray], boot: Bootstrap
             ) -> tuple[list[dict[str, Any]], list[list[str]]]:
    """Each row's MRR with its interval, its MRR on each group of questions (``groups``: name ->
    mask) and its paired difference to the first row (the retriever): the JSON rows and the
    body of the printed table."""
    base = next(iter(rows.values()))
    out, body = [], []
    for label, rr in rows.items():
        d = boot.diff(rr, base)
        by = {name: float(rr[mask].mean()) for name, mask in groups.items()}
        out.append({"row": label, "mrr": float(rr.mean()), "ci": boot.interval(rr), "vs_bm25": d,
                    **{f"mrr_{name}": v for name, v in by.items()}})
        body.append([label, f"{rr.mean():.3f}", ci_text(boot.interval(rr))]
                    + [f"{v:.3f}" for v in by.values()] + [diff_text(d)])
    return out, body
