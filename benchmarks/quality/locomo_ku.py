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
and heaprank with ``Config.scoring.intent_recency``, its two multipliers chosen on the development
conversations (0-4) by a grid, each on its own intent's questions, then applied unchanged to the
test conversations (5-9). ``--write FILE`` saves the augmented data (LoCoMo format) to read it.
"""

from __future__ import annotations

import argparse
import copy
import sys
from typing import Any

import numpy as np

from .harness.options import add_shared, augmented_data, dev_split, emit
from .harness.report import git_state, mrr_rows, text_table

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
    add_shared(parser, "data", "seed", "resamples", "write", "json", "out")


def _category_of(raw: list[dict[str, Any]]) -> list[str]:
    return [qa["category"] for s in raw for qa in s["qa"]]


def _rows(prep: Any, on_dev: np.ndarray, intent: np.ndarray, seed: int
          ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, float]], dict[str, float]]:
    """Every row's reciprocal ranks over all questions, the dev grid's MRR by multiplier and
    the multipliers it chose."""
    from heaprank import Config, Reranker, Scoring

    from .harness.metrics import collect
    from .harness.runner import HeaprankRunner

    runner = HeaprankRunner(prep, seed=seed)
    every = [q.index for q in prep.data.questions]

    def evaluate(config: Config) -> np.ndarray:
        return collect(runner.evaluate(Reranker(config=config), every)).rr

    rows: dict[str, np.ndarray] = {
        "BM25 top 50 (bm25s)": collect([prep.retriever_score(qi) for qi in every]).rr,
        "heaprank defaults": evaluate(Config()),
        "heaprank recency off": evaluate(Config().with_weights(recency=0.0)),
    }
    grid: dict[str, dict[str, float]] = {"recent": {}, "past": {}}
    for name, values in (("recent", RECENT_GRID), ("past", PAST_GRID)):
        mask = on_dev & (intent == name)
        for v in values:
            cfg = Config(scoring=Scoring(intent_recency={name: v}))
            grid[name][f"{v:g}"] = float(evaluate(cfg)[mask].mean())
    chosen = {name: float(max(grid[name], key=lambda k: (grid[name][k], -abs(float(k) - 1))))
              for name in grid}
    rows[f"heaprank + intent (recent x{chosen['recent']:g}, past x{chosen['past']:g}; "
         "dev grid)"] = evaluate(Config(scoring=Scoring(intent_recency=chosen)))
    return rows, grid, chosen


def run(args: argparse.Namespace) -> int:
    from .harness.data import BM25Scorer, build_candidates, parse_locomo
    from .harness.metrics import Bootstrap
    from .harness.runner import prepare

    loaded = augmented_data(args, augment, "locomo-ku")
    if loaded is None:
        return 2
    path, raw = loaded
    intents = _category_of(raw)
    for sample in raw:  # the loader wants integer categories
        for qa in sample["qa"]:
            qa["category"] = 1 if qa["category"] == "recent" else 2
    data = parse_locomo(raw, origin=str(path))
    dev = set(dev_split(len(data.conversations), halve_small=True))
    prep = prepare(data, build_candidates(data, "bm25", bm25=BM25Scorer(data)), 1.0)
    intent = np.array(["recent" if q.category == 1 else "past" for q in data.questions])
    assert len(intents) == len(intent)
    on_dev = np.array([q.conv in dev for q in data.questions])
    rows, grid, chosen = _rows(prep, on_dev, intent, args.seed)

    result: dict[str, Any] = {"benchmark": "locomo-ku", "git": git_state(),
                              "command": "python -m benchmarks locomo-ku " + " ".join(
                                  sys.argv[2:]),
                              "seed": args.seed, "dev_grid_mrr": grid, "chosen": chosen,
                              "splits": {}}
    lines = [f"LoCoMo knowledge update: {len(intent)} questions ({int(on_dev.sum())} dev, "
             f"{int((~on_dev).sum())} test), {sum(len(c.turns) for c in data.conversations)} "
             "turns; no feedback; BM25 top 50 candidates", ""]

    def named(mask: np.ndarray) -> str:
        return ", ".join(sorted({data.conversations[q.conv].sample_id
                                 for q, m in zip(data.questions, mask) if m}))

    for split, mask in ((f"test ({named(~on_dev)})", ~on_dev), (f"dev ({named(on_dev)})",
                                                                 on_dev)):
        boot = Bootstrap(int(mask.sum()), resamples=args.resamples, seed=args.seed)
        groups = {n: intent[mask] == n for n in ("recent", "past")}
        out, body = mrr_rows({label: rr[mask] for label, rr in rows.items()}, groups, boot)
        result["splits"][split] = out
        lines += [f"{split}:"] + text_table(["row", "MRR", "95% CI", "recent", "past",
                                             "dMRR vs BM25"], body, {1, 3, 4}) + [""]
    lines.append("dev grid (MRR of each intent's dev questions by multiplier): " + "; ".join(
        f"{n}: " + ", ".join(f"{k} {v:.3f}" for k, v in g.items()) for n, g in grid.items()))
    emit(result, "\n".join(lines), args)
    return 0
