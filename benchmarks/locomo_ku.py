"""``python -m benchmarks locomo-ku``: a knowledge-update setting built from LoCoMo's format.

LongMemEval's knowledge-update questions ask for the current value of a fact that changed over
the conversation. LoCoMo has few of them, so this benchmark writes them into LoCoMo's own
format: for each conversation and each of its two speakers, five facts (job, home city, car,
favourite restaurant, gym) are stated two or three times, each time with a new value, in
distinct sessions picked by a seeded draw; every statement is appended to its session as a
turn of that speaker, in one of three phrasings. Each fact then gets two questions:

- ``recent``: "What is Caroline's job now?"; its evidence is the newest statement;
- ``past``: "What was Caroline's job at first?"; its evidence is the oldest statement.

The real turns stay as they are (they are the distractors). Candidates are BM25 top 50 over the
augmented conversation, questions are asked one day after its last session, and nothing is
learned (the intent multiplier needs no feedback). Rows: BM25; heaprank defaults; recency off;
and heaprank with ``Config.intent_recency``, its two multipliers chosen on the development
conversations (0-4) by a grid, each on its own intent's questions, then applied unchanged to the
test conversations (5-9). ``--write FILE`` saves the augmented data (LoCoMo format) to read it.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

RECENT_GRID = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
PAST_GRID = (1.0, 0.0, -1.0, -2.0, -4.0, -8.0, -16.0)

#: (fact, values, three phrasings of a statement, recent question, past question)
FACTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...], str, str], ...] = (
    ("job", ("a nurse", "a bakery manager", "a bus driver", "a data analyst", "a librarian"),
     ("I got a new job, I'm working as {v}.", "Work update: my job now is {v}.",
      "I changed jobs again and I am {v} at the moment."),
     "What is {n}'s job now?", "What was {n}'s job at first?"),
    ("city", ("Denver", "Austin", "Portland", "Boston", "Chicago"),
     ("We moved, I live in {v} now.", "New home! I'm living in {v}.",
      "I relocated to {v}, that's where I live."),
     "Where does {n} live currently?", "Where did {n} live originally?"),
    ("car", ("a red Honda Civic", "a blue Subaru", "a white Tesla", "an old Jeep", "a gray Volvo"),
     ("I bought a car: {v}.", "My car these days is {v}.", "I traded in my car for {v}."),
     "What car does {n} drive now?", "What car did {n} drive at first?"),
    ("restaurant", ("Luigi's", "the Blue Lotus", "Taco Loco", "Sakura House", "the Green Fork"),
     ("My favorite restaurant is {v}.", "I have a new favorite restaurant: {v}.",
      "These days {v} is my favorite restaurant."),
     "What is {n}'s favorite restaurant now?", "What was {n}'s favorite restaurant at first?"),
    ("gym", ("FitHub", "Iron Temple", "Peak Climbing", "the YMCA", "CoreFlow Yoga"),
     ("I joined a gym, {v}.", "I switched my gym membership to {v}.",
      "My gym is {v} now, I go every week."),
     "Which gym does {n} go to now?", "Which gym did {n} go to at first?"),
)


def augment(raw: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The LoCoMo samples with the facts written in and the ``qa`` replaced by KU questions
    (``category`` "recent" or "past")."""
    out = []
    for ci, sample in enumerate(raw):
        rng = np.random.default_rng([seed, ci, 0x4B55])
        sample = copy.deepcopy(sample)
        conv = sample["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in conv
                          if k.startswith("session_") and k.count("_") == 1 and conv[k])
        qa = []
        added: dict[int, int] = {}
        for speaker in (conv["speaker_a"], conv["speaker_b"]):
            for fact, values, phrasings, recent_q, past_q in FACTS:
                times = min(2 + int(rng.random() < 0.5), len(sessions))
                if times < 2:  # one session: nothing can change
                    continue
                chosen = sorted(rng.choice(sessions, size=times, replace=False).tolist())
                picks = rng.choice(len(values), size=times, replace=False).tolist()
                ids = []
                for i, (session, value) in enumerate(zip(chosen, picks)):
                    # Numbered from 901 within the session: never one of its real turns.
                    added[session] = added.get(session, 0) + 1
                    dia = f"D{session}:{900 + added[session]}"
                    text = phrasings[(i + int(rng.integers(3))) % 3].format(v=values[value])
                    conv[f"session_{session}"].append(
                        {"speaker": speaker, "dia_id": dia, "text": text})
                    ids.append(dia)
                qa.append({"question": recent_q.format(n=speaker), "evidence": [ids[-1]],
                           "category": "recent", "fact": fact})
                qa.append({"question": past_q.format(n=speaker), "evidence": [ids[0]],
                           "category": "past", "fact": fact})
        sample["qa"] = qa
        out.append(sample)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .locomo import DEFAULT_DATA

    parser.add_argument("--data", metavar="PATH", help=f"locomo10.json (default {DEFAULT_DATA})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--write", metavar="FILE", help="save the augmented data here")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON result here")


def _category_of(raw: list[dict[str, Any]]) -> list[str]:
    return [qa["category"] for s in raw for qa in s["qa"]]


def run(args: argparse.Namespace) -> int:
    from heaprank import Config, Reranker

    from .locomo import DEV_CONVERSATIONS, augmented_data
    from .locomo_data import BM25Scorer, build_candidates, parse_locomo
    from .locomo_report import _ci, _dci, _git, _table
    from .locomo_sim import HeaprankRunner, prepare
    from .metrics import Bootstrap, collect, score_ranking

    loaded = augmented_data(args, augment, "locomo-ku")
    if loaded is None:
        return 2
    path, raw = loaded
    intents = _category_of(raw)
    for sample in raw:  # the loader wants integer categories
        for qa in sample["qa"]:
            qa["category"] = 1 if qa["category"] == "recent" else 2
    data = parse_locomo(raw, origin=str(path))
    n_conv = len(data.conversations)
    dev = {int(c) for c in DEV_CONVERSATIONS.split(",") if int(c) < n_conv}
    if n_conv <= max(dev, default=0) + 1:
        dev = set(range(max(1, n_conv // 2)))
    prep = prepare(data, build_candidates(data, "bm25", bm25=BM25Scorer(data)), 1.0)
    runner = HeaprankRunner(prep, seed=args.seed)
    intent = np.array(["recent" if q.category == 1 else "past" for q in data.questions])
    assert len(intents) == len(intent)
    on_dev = np.array([q.conv in dev for q in data.questions])
    every = [q.index for q in data.questions]

    def evaluate(config: Config) -> np.ndarray:
        return collect(runner.evaluate(Reranker(config=config), every)).rr

    rows: dict[str, np.ndarray] = {
        "BM25 top 50 (bm25s)": collect([score_ranking([c.id for c in prep.candidates[qi]],
                                                      prep.evidence[qi]) for qi in every]).rr,
        "heaprank defaults": evaluate(Config()),
        "heaprank recency off": evaluate(Config().with_weights(recency=0.0)),
    }
    grid: dict[str, dict[str, float]] = {"recent": {}, "past": {}}
    for name, values in (("recent", RECENT_GRID), ("past", PAST_GRID)):
        mask = on_dev & (intent == name)
        for v in values:
            grid[name][f"{v:g}"] = float(evaluate(Config(intent_recency={name: v}))[mask].mean())
    chosen = {name: float(max(grid[name], key=lambda k: (grid[name][k], -abs(float(k) - 1))))
              for name in grid}
    rows[f"heaprank + intent (recent x{chosen['recent']:g}, past x{chosen['past']:g}; "
         "dev grid)"] = evaluate(
        Config(intent_recency=chosen))

    result: dict[str, Any] = {"benchmark": "locomo-ku", "git": _git(),
                              "command": "python -m benchmarks locomo-ku " + " ".join(
                                  sys.argv[2:]),
                              "seed": args.seed, "dev_grid_mrr": grid, "chosen": chosen,
                              "splits": {}}
    lines = [f"LoCoMo knowledge update: {len(every)} questions ({int(on_dev.sum())} dev, "
             f"{int((~on_dev).sum())} test), {sum(len(c.turns) for c in data.conversations)} "
             "turns; no feedback; BM25 top 50 candidates", ""]
    base = next(iter(rows))
    def named(mask: np.ndarray) -> str:
        return ", ".join(sorted({data.conversations[q.conv].sample_id
                                 for q, m in zip(data.questions, mask) if m}))

    for split, mask in ((f"test ({named(~on_dev)})", ~on_dev), (f"dev ({named(on_dev)})",
                                                                 on_dev)):
        boot = Bootstrap(int(mask.sum()), resamples=args.resamples, seed=args.seed)
        body, out = [], []
        for label, rr in rows.items():
            sub = rr[mask]
            d = boot.diff(sub, rows[base][mask])
            by = {n: float(rr[mask & (intent == n)].mean()) for n in ("recent", "past")}
            out.append({"row": label, "mrr": float(sub.mean()), "ci": boot.interval(sub),
                        "vs_bm25": d, **{f"mrr_{n}": v for n, v in by.items()}})
            body.append([label, f"{sub.mean():.3f}", _ci(boot.interval(sub)),
                         f"{by['recent']:.3f}", f"{by['past']:.3f}", _dci(d)])
        result["splits"][split] = out
        lines += [f"{split}:"] + _table(["row", "MRR", "95% CI", "recent", "past",
                                         "dMRR vs BM25"], body, {1, 3, 4}) + [""]
    lines.append("dev grid (MRR of each intent's dev questions by multiplier): " + "; ".join(
        f"{n}: " + ", ".join(f"{k} {v:.3f}" for k, v in g.items()) for n, g in grid.items()))
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text if args.json else "\n".join(lines))
    return 0
