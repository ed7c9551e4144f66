"""``python -m benchmarks views``: build a real SQLite state from LoCoMo, then run heaprank's
command line on it (``tune``, ``replay``, ``forget --preview``, ``plot``), printing every command
and its output.

The state is built by use, not by hand:

- each conversation of ``--conversations`` (the development split 0-4 by default) is a
  namespace, every dialog turn a memory created at its session's date;
- the conversations' calendars are shifted so their last sessions fall on the same day: the five
  users are active over the same months, as on one service, so the tuning's time split (the
  latest 20% of the log held out) holds late questions of every namespace. Ages within a
  conversation, which are all that recency and retention read, are unchanged;
- every usable question is asked once per ``--rounds``, at a seeded time between one hour after
  its latest evidence turn was said and two weeks after the conversation's last session; the
  candidates are the BM25 top 50 among the turns said by then (so nothing is ranked before it
  exists); all questions run in time order through ``Reranker.rerank`` (``k=10`` shown) and
  ``Reranker.feedback`` with oracle feedback (the evidence turns among the shown 10 are used).

The state then holds links, per-document use and an impression log with feedback. The command
line runs as subprocesses (``python -m heaprank ...``) on that file, exactly as a user would run
it; ``--out`` saves every command with its output (the ``--json`` ones parsed). The state file
and the tuned config go to ``--state`` and ``--tuned`` (git-ignored by default: never commit a
state, it is built from LoCoMo's text); the four plots to ``--figures``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .. import REPO_ROOT
from .harness.data import TOP_N, BM25Scorer, CandidateList, Conversation, Dataset, top_indices
from .harness.options import DEV_CONVERSATIONS, add_shared, data_path

DEFAULT_STATE = "benchmarks/out/views/views.db"
DEFAULT_POLICY = "benchmarks/quality/views_policy.toml"
DEFAULT_FIGURES = "benchmarks/figures"
SHOWN_K = 10
HOUR_S = 3600.0
#: Questions are asked until this long after a conversation's last session.
ASK_WINDOW_AFTER_S = 14 * 86_400.0
#: The image each ``heaprank plot NAME`` writes, under ``--figures``.
FIGURES = {"links": "views_links.png", "tune": "views_tune.png",
           "retention": "views_retention.png", "forget-matrix": "views_forget_matrix.png"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, "data")
    parser.add_argument("--conversations", default=DEV_CONVERSATIONS,
                        help=f"conversations used, by index (default {DEV_CONVERSATIONS}, the "
                        "development split)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="ask every question this many times, each at its own time (default 1)")
    parser.add_argument("--state", default=DEFAULT_STATE, metavar="FILE",
                        help=f"the SQLite file to build, replaced if it exists (default "
                        f"{DEFAULT_STATE})")
    parser.add_argument("--tuned", metavar="FILE",
                        help="the config file `tune --apply --out` writes (default: "
                        "views-tuned.json beside the state)")
    parser.add_argument("--policy", default=DEFAULT_POLICY, metavar="FILE",
                        help=f"retention policy to preview and plot (default {DEFAULT_POLICY})")
    parser.add_argument("--figures", default=DEFAULT_FIGURES, metavar="DIR",
                        help=f"where the plots go (default {DEFAULT_FIGURES})")
    parser.add_argument("--namespace", help="the namespace tuned on its own (default: the one "
                        "with most impressions)")
    parser.add_argument("--forget-after-days", type=float, default=30.0,
                        help="the forget preview looks this long after the last question")
    parser.add_argument("--min-impressions", type=int, default=50,
                        help="passed to tune and plot tune (default 50, the command's own)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the questions' times")
    parser.add_argument("--out", metavar="FILE", help="also write every command and its output "
                        "as JSON here")
    parser.add_argument("--no-timing", action="store_true", help="leave wall times out")


# --------------------------------------------------------------------------- building


@dataclass(frozen=True, slots=True)
class Ask:
    """One question asked: its index in the (repeated) question list and when it is asked."""

    question: int
    at: float


def align_calendars(data: Any) -> Any:
    """``data`` with each conversation's times shifted so every last session falls on the
    latest one's day (differences within a conversation unchanged)."""
    end = max(c.last_session_at for c in data.conversations)
    convs = []
    for conv in data.conversations:
        shift = end - conv.last_session_at
        turns = [replace(t, created_at=t.created_at + shift) for t in conv.turns]
        convs.append(Conversation(conv.sample_id, turns, conv.last_session_at + shift))
    return Dataset(convs, data.questions, data.n_questions_total, data.evidence_stats)


def repeat_questions(data: Any, rounds: int) -> Any:
    """``data`` with its question list repeated ``rounds`` times (indices renumbered)."""
    questions = [replace(q, index=r * len(data.questions) + q.index)
                 for r in range(rounds) for q in data.questions]
    return Dataset(data.conversations, questions, data.n_questions_total, data.evidence_stats)


def ask_times(data: Any, seed: int) -> list[Ask]:
    """When each question is asked, in time order (ties by question index)."""
    asks = []
    for q in data.questions:
        conv = data.conversations[q.conv]
        said = max(conv.turns[t].created_at for t in q.evidence) + HOUR_S
        until = max(conv.last_session_at + ASK_WINDOW_AFTER_S, said)
        u = float(np.random.default_rng([seed, q.index, 0xA5C]).random())
        asks.append(Ask(q.index, said + u * (until - said)))
    return sorted(asks, key=lambda a: (a.at, a.question))


def candidates_said_by(data: Any, asks: list[Ask]) -> list[Any]:
    """Per question (by index), the BM25 top 50 among the turns said by its time."""
    bm25 = BM25Scorer(data)
    said = [np.array([t.created_at for t in c.turns]) for c in data.conversations]
    lists: list[Any] = [None] * len(data.questions)
    for ask in asks:
        q = data.questions[ask.question]
        scores = np.where(said[q.conv] <= ask.at, bm25.scores(q), 0.0)
        top = top_indices(scores, TOP_N, positive_only=True)
        lists[ask.question] = CandidateList(top, scores[top])
    return lists


def build_state(url: str, prep: Any, asks: list[Ask]) -> dict[str, Any]:
    """Run every ask through rerank and oracle feedback on the state at ``url``; the MRR of the
    rankings shown (over the whole re-ranked list) next to BM25's order of the same candidates."""
    from heaprank import Reranker

    from .harness.metrics import score_ranking

    shown_rr, bm25_rr = [], []
    used_total = with_use = skipped = 0
    with Reranker(url) as rr:
        for ask in asks:
            q = prep.data.questions[ask.question]
            cands, evidence = prep.candidates[ask.question], prep.evidence[ask.question]
            if not cands:
                skipped += 1
                continue
            ranking = rr.rerank(q.text, cands, namespace=prep.namespaces[q.conv], k=SHOWN_K,
                                now=ask.at)
            shown_rr.append(score_ranking(ranking.order_ids, evidence)[0])
            bm25_rr.append(score_ranking([c.id for c in cands], evidence)[0])
            used = [d for d in ranking.ids if d in evidence]
            rr.feedback(ranking.recall_id, used=used, now=ask.at + 60.0)
            used_total += len(used)
            with_use += bool(used)
    return {"asked": len(asks), "no_candidates": skipped, "feedbacks": len(shown_rr),
            "feedbacks_with_use": with_use, "used_items": used_total,
            "bm25_mrr": float(np.mean(bm25_rr)) if bm25_rr else None,
            "heaprank_mrr": float(np.mean(shown_rr)) if shown_rr else None}


def shown_ages(url: str) -> dict[str, float]:
    """From the state's impression log: the median age (days since the last use, or creation)
    of the shown items that were used and of those that were not, and the share of each
    younger than a week. What recency can learn from this workload."""
    from heaprank.state import open_state
    from heaprank.state.codec import USED

    used: list[float] = []
    other: list[float] = []
    state = open_state(url)
    try:
        for imp in state.feedback_log(None):
            age = imp.signal_names.index("age_days")
            for values, verdict in zip(imp.signals, imp.verdicts):
                (used if verdict == USED else other).append(values[age])
    finally:
        state.close()
    u, o = np.asarray(used), np.asarray(other)
    if not (u.size and o.size):
        raise ValueError("the state holds no shown item both used and not used")
    return {"used_median_days": float(np.median(u)), "other_median_days": float(np.median(o)),
            "used_under_week": float((u < 7).mean()), "other_under_week": float((o < 7).mean())}


# ------------------------------------------------------------------------ the CLI runs


def sqlite_url(path: str) -> str:
    """``sqlite:///relative.db`` or ``sqlite:////abs.db`` for a file path."""
    return "sqlite:///" + path


class CommandLine:
    """Runs ``python -m heaprank ...`` as a subprocess, prints the command and its output, and
    keeps both. A command that fails stops the run: a real state must not break the CLI."""

    def __init__(self, *, timing: bool) -> None:
        self.timing = timing
        self.records: list[dict[str, Any]] = []
        self.env = dict(os.environ)
        # This checkout's heaprank, whatever is installed.
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT)] + ([self.env["PYTHONPATH"]] if self.env.get("PYTHONPATH") else []))

    def __call__(self, *argv: str) -> str:
        shown = "$ python -m heaprank " + shlex.join(argv)
        print(shown, flush=True)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "heaprank", *argv], capture_output=True,
                              text=True, env=self.env, check=False)
        seconds = time.perf_counter() - t0
        record: dict[str, Any] = {"command": shown[2:], "exit": done.returncode,
                                  "stdout": done.stdout, "stderr": done.stderr}
        if self.timing:
            record["seconds"] = round(seconds, 2)
        if done.returncode == 0 and "--json" in argv:
            record["json"] = json.loads(done.stdout)
            record["stdout"] = None
            print(f"(JSON, {len(done.stdout.splitlines())} lines: kept in --out)")
        else:
            sys.stdout.write(done.stdout)
        sys.stdout.write(done.stderr)
        if self.timing:
            print(f"({seconds:.1f} s)")
        self.records.append(record)
        if done.returncode != 0:
            raise RuntimeError(f"{shown[2:]} exited with {done.returncode}")
        return done.stdout


def _iso_day(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d")


def run_views(cli: CommandLine, args: argparse.Namespace, *, url: str, namespace: str,
              namespaces: list[str], tuned: str, figures: Path, forget_now: str) -> None:
    """Every view of issue 10 on the built state, in the order a user would look (the policy
    and ``--min-impressions`` from ``args``)."""
    least, policy = ["--min-impressions", str(args.min_impressions)], args.policy
    cli("stats", "--state", url)
    # Tuning: the pooled fit (with the half-life: the state's times are real) applied to a
    # config file, then one namespace shrunk toward it; the same two as JSON.
    cli("tune", "--state", url, "--fit-half-life", *least, "--apply", "--out", tuned)
    cli("tune", "--state", url, "--fit-half-life", *least, "--namespace", namespace)
    cli("tune", "--state", url, "--fit-half-life", *least, "--json")
    cli("tune", "--state", url, "--fit-half-life", *least, "--namespace", namespace, "--json")
    # Replay: the defaults, then the tuned file (when tuning moved, it exists).
    cli("replay", "--state", url)
    if Path(tuned).is_file():
        cli("replay", "--state", url, "--config", tuned)
        cli("replay", "--state", url, "--config", tuned, "--json")
    else:
        print(f"(no tuned config at {tuned}: the pooled fit did not move, nothing to replay)")
    # Forgetting: the policy's verdict on each namespace, a month after the last question.
    for ns in namespaces:
        cli("forget", "--state", url, "--policy", policy, "--namespace", ns, "--preview",
            "--now", forget_now, "--limit", "3")
    # The four plots.
    out = {name: str(figures / file) for name, file in FIGURES.items()}
    cli("plot", "links", "--state", url, "--min-n", "5", "--out", out["links"])
    cli("plot", "tune", "--state", url, "--fit-half-life", *least, "--out", out["tune"])
    cli("plot", "retention", "--state", url, "--policy", policy, "--uses", "1",
        "--out", out["retention"])
    cli("plot", "forget-matrix", "--policy", policy, "--out", out["forget-matrix"])


def run(args: argparse.Namespace) -> int:
    from .harness.data import load_locomo
    from .harness.runner import prepare

    started = time.perf_counter()
    keep = sorted({int(c) for c in args.conversations.split(",") if c.strip()})
    try:
        if not keep or min(keep) < 0:
            raise ValueError(f"--conversations: expected indices >= 0, got {args.conversations!r}")
        if args.rounds < 1:
            raise ValueError(f"--rounds: must be >= 1, got {args.rounds}")
        data = load_locomo(data_path(args.data), conversations=max(keep) + 1)
        if max(keep) >= len(data.conversations):
            raise ValueError(f"--conversations: the data has {len(data.conversations)}")
    except (FileNotFoundError, ValueError) as exc:
        print(f"python -m benchmarks views: {exc}", file=sys.stderr)
        return 2
    data = _only(data, keep)
    data = repeat_questions(align_calendars(data), args.rounds)
    asks = ask_times(data, args.seed)
    prep = prepare(data, candidates_said_by(data, asks), 0.0)

    url, state_file, tuned, figures = _fresh_files(args)
    built = build_state(url, prep, asks)
    built["ages"] = shown_ages(url)
    per_ns = {ns: 0 for ns in prep.namespaces}
    for ask in asks:
        if prep.candidates[ask.question]:
            per_ns[prep.namespaces[data.questions[ask.question].conv]] += 1
    namespace = args.namespace or max(per_ns, key=lambda ns: (per_ns[ns], ns))
    first, last = asks[0].at, asks[-1].at
    _print_build(args, keep, prep, asks, state_file, built, time.perf_counter() - started)

    cli = CommandLine(timing=not args.no_timing)
    forget_now = _iso_day(last + args.forget_after_days * 86_400.0)
    try:
        run_views(cli, args, url=url, namespace=namespace, namespaces=prep.namespaces,
                  tuned=tuned, figures=figures, forget_now=forget_now)
    except RuntimeError as exc:
        print(f"python -m benchmarks views: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.out:
            result = {"benchmark": "views", "conversations": keep, "namespaces": prep.namespaces,
                      "rounds": args.rounds, "seed": args.seed, "first_ask": _iso_day(first),
                      "last_ask": _iso_day(last), "forget_now": forget_now,
                      "tuned_namespace": namespace, "build": built, "commands": cli.records}
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not args.no_timing:
        print(f"wall time {time.perf_counter() - started:.1f} s")
    return 0


def _fresh_files(args: argparse.Namespace) -> tuple[str, Path, str, Path]:
    """The state's URL and file (removed if there), the tuned config's path (removed if
    there) and the figures' folder."""
    from heaprank.state import sqlite_path

    url = sqlite_url(args.state)
    state_file = Path(sqlite_path(url))
    state_file.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):  # a fresh state every run
        Path(f"{state_file}{suffix}").unlink(missing_ok=True)
    tuned = args.tuned or str(state_file.with_name("views-tuned.json"))
    Path(tuned).unlink(missing_ok=True)
    figures = Path(args.figures)
    figures.mkdir(parents=True, exist_ok=True)
    return url, state_file, tuned, figures


def _print_build(args: argparse.Namespace, keep: list[int], prep: Any, asks: list[Ask],
                 state_file: Path, built: dict[str, Any], build_s: float) -> None:
    """What the state was built from, what it holds, and the age of what was shown."""
    print(f"LoCoMo conversations {','.join(map(str, keep))} ({', '.join(prep.namespaces)}), "
          f"{len(prep.data.questions)} questions asked {args.rounds}x, {_iso_day(asks[0].at)} "
          f"to {_iso_day(asks[-1].at)} (calendars aligned on the last session), BM25 top 50 of "
          f"the turns said by then, {SHOWN_K} shown, oracle feedback")
    print(f"state {state_file}: {built['feedbacks']} reranks with feedback "
          f"({built['feedbacks_with_use']} with a used item, {built['used_items']} used items; "
          f"{built['no_candidates']} questions had no candidate); MRR of the rankings shown "
          f"while it learned {built['heaprank_mrr']:.4f} (BM25's order {built['bm25_mrr']:.4f})"
          + ("" if args.no_timing else f"; built in {build_s:.1f} s"))
    ages = built["ages"]
    print(f"age of the shown items (days since the last use, or creation), median: used "
          f"{ages['used_median_days']:.1f}, not used {ages['other_median_days']:.1f}; younger "
          f"than a week: used {ages['used_under_week']:.0%}, not used "
          f"{ages['other_under_week']:.0%}")
    print()


def _only(data: Any, keep: list[int]) -> Any:
    """``data`` restricted to the conversations ``keep`` (renumbered 0..n-1)."""
    where = {c: i for i, c in enumerate(keep)}
    questions = [replace(q, conv=where[q.conv]) for q in data.questions if q.conv in where]
    questions = [replace(q, index=i) for i, q in enumerate(questions)]
    return Dataset([data.conversations[c] for c in keep], questions, data.n_questions_total,
                   data.evidence_stats)
