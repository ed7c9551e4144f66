"""``python -m benchmarks locomo-roles``: questions about the assistant's own turns, written into
LoCoMo's format (issue 24, item 4; built like ``locomo-ku``).

In each conversation the first speaker becomes ``user`` and the second ``assistant`` (every turn's
speaker, so every candidate's ``source`` is a role). For eight topics (a hotel, a restaurant, a
book, ...) the assistant recommends one value and the user names another, in two distinct
sessions picked by a seeded draw; both statements name the topic, neither uses a word of the
questions. Each topic then gets two questions:

- second person, "Which hotel did you recommend?": its evidence is the assistant's statement;
- first person, "Which hotel did I mention?": its evidence is the user's.

Only the role of the speaker tells the two statements apart, which BM25 cannot see (both match
the topic word). The real turns stay as distractors. Protocol as ``locomo``: BM25 top 50,
leave one conversation out, oracle feedback from the other conversations' role questions, scored
on the full list; the development rows learn from and hold out conversations 0-4 only, the test
rows hold out 5-9 (learning from the other nine). Rows: BM25, heaprank day one, heaprank after
feedback without and with ``Config(features=Features(speaker_roles=True))``.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

import numpy as np

from .harness.options import add_shared, augmented_data, dev_split, emit
from .harness.report import diff_text, git_state, mrr_rows, text_table

#: (topic, values): the assistant recommends one value, the user names another.
TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hotel", ("the Grand Marlow", "Casa Verde", "the Harbor Inn", "Hotel Lumen")),
    ("restaurant", ("Osteria Rossa", "the Copper Pot", "Sakura Garden", "Blue Fig")),
    ("book", ("The Salt Road", "Winter Orchards", "A Map of Rivers", "Quiet Engines")),
    ("movie", ("Northern Lights", "The Last Ferry", "Paper Moons", "Iron Valley")),
    ("trail", ("Eagle Ridge", "Fern Hollow", "Cedar Loop", "Stone Creek")),
    ("podcast", ("Deep Dive Weekly", "The Long Table", "Small Wonders", "Night Shift Radio")),
    ("gift", ("a leather journal", "a ceramic teapot", "a star map print", "a wool scarf")),
    ("recipe", ("lemon risotto", "lentil curry", "miso salmon", "shakshuka")),
)
ASSISTANT_SAYS = ("For the {t}, {v} would be my pick.", "{v} is a {t} worth a look.",
                  "Have a look at {v}, a great {t}.")
USER_SAYS = ("The {t} I have in mind is {v}.", "I was reading about {v}, a {t}.",
             "{v} is the {t} I keep thinking of.")
SECOND = ("Which {t} did you recommend?", "What {t} did you suggest to me?")
FIRST = ("Which {t} did I mention?", "What {t} did I bring up?")
ROLES = ("user", "assistant")


def augment(raw: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The LoCoMo samples with speakers as roles, the statements written in and the ``qa``
    replaced by role questions (``category`` 1: about the assistant's turn, 2: the user's)."""
    out = []
    for ci, sample in enumerate(raw):
        rng = np.random.default_rng([seed, ci, 0x7013])
        sample = copy.deepcopy(sample)
        conv = sample["conversation"]
        role = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
        sessions = sorted(int(k.split("_")[1]) for k in conv
                          if k.startswith("session_") and k.count("_") == 1 and conv[k])
        for s in sessions:
            for turn in conv[f"session_{s}"]:
                turn["speaker"] = role.get(turn["speaker"], turn["speaker"])
        conv["speaker_a"], conv["speaker_b"] = ROLES
        qa: list[dict[str, Any]] = []
        added: dict[int, int] = {}
        for topic, values in TOPICS:
            if len(sessions) < 2:
                continue
            where = rng.choice(sessions, size=2, replace=False).tolist()
            picks = rng.choice(len(values), size=2, replace=False).tolist()
            ids = []
            for speaker, session, value, says in zip(("assistant", "user"), where, picks,
                                                     (ASSISTANT_SAYS, USER_SAYS)):
                added[session] = added.get(session, 0) + 1
                dia = f"D{session}:{900 + added[session]}"  # never one of the real turns
                text = says[int(rng.integers(len(says)))].format(t=topic, v=values[value])
                conv[f"session_{session}"].append({"speaker": speaker, "dia_id": dia,
                                                   "text": text})
                ids.append(dia)
            qa.append({"question": SECOND[int(rng.integers(2))].format(t=topic),
                       "evidence": [ids[0]], "category": 1})
            qa.append({"question": FIRST[int(rng.integers(2))].format(t=topic),
                       "evidence": [ids[1]], "category": 2})
        sample["qa"] = qa
        out.append(sample)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, "data", "seed", "resamples", "write", "json", "out")


def _rows(data: Any, prep: Any, seed: int, training: frozenset[int], held: list[int]
          ) -> dict[str, np.ndarray]:
    """Each row's reciprocal ranks over the questions of the ``held`` conversations, each
    learning from the ``training`` conversations but its own."""
    from heaprank import Config, Reranker

    from .harness.metrics import collect
    from .harness.runner import HeaprankRunner

    runner = HeaprankRunner(prep, seed=seed, train_conversations=training)
    qs = [q.index for q in data.questions if q.conv in held]
    default = Config()
    rows: dict[str, list[Any]] = {
        "BM25 top 50 (bm25s)": [prep.retriever_score(qi) for qi in qs],
        "heaprank day one": runner.evaluate(Reranker(config=default), qs)}
    for label, on in (("heaprank + oracle, no speaker-role slot", False),
                      ("heaprank + oracle, speaker-role slot", True)):
        cfg = default.with_changes(features={"speaker_roles": on})
        scores: list[Any] = []
        for f in held:
            fq = [qi for qi in qs if data.questions[qi].conv == f]
            scores += runner.evaluate(runner.train(f, cfg, "oracle"), fq)
        rows[label] = scores
    return {k: collect(v).rr for k, v in rows.items()}


def run(args: argparse.Namespace) -> int:
    from .harness.data import BM25Scorer, build_candidates, parse_locomo
    from .harness.metrics import Bootstrap
    from .harness.runner import prepare

    loaded = augmented_data(args, augment, "locomo-roles")
    if loaded is None:
        return 2
    path, raw = loaded
    data = parse_locomo(raw, origin=str(path))
    n = len(data.conversations)
    dev = dev_split(n)
    test = [c for c in range(n) if c not in dev]
    prep = prepare(data, build_candidates(data, "bm25", bm25=BM25Scorer(data)), 1.0)
    splits = {"dev (learns from 0-4 only)": (frozenset(dev), dev),
              "test (5-9 held out, learns from the other nine)": (frozenset(range(n)), test)}
    result: dict[str, Any] = {"benchmark": "locomo-roles", "git": git_state(),
                              "command": "python -m benchmarks locomo-roles", "seed": args.seed,
                              "splits": {}}
    lines = [f"LoCoMo roles: {len(data.questions)} questions about the assistant's or the "
             f"user's statements, {sum(len(c.turns) for c in data.conversations)} turns; "
             "BM25 top 50; oracle feedback", ""]
    for name, (training, held) in splits.items():
        if not held:
            continue
        rows = _rows(data, prep, args.seed, training, held)
        cats = np.array([q.category for q in data.questions if q.conv in held])
        boot = Bootstrap(len(cats), resamples=args.resamples, seed=args.seed)
        out, body = mrr_rows(rows, {k: cats == c for k, c in (("you", 1), ("I", 2))}, boot)
        slot = boot.diff(rows["heaprank + oracle, speaker-role slot"],
                         rows["heaprank + oracle, no speaker-role slot"])
        result["splits"][name] = {"rows": out, "slot_gain": slot}
        lines += [f"{name}, {len(cats)} questions:"] + text_table(
            ["row", "MRR", "95% CI", "'you' qs", "'I' qs", "dMRR vs BM25"], body, {1, 3, 4})
        lines += [f"speaker-role slot, gain over no slot: {diff_text(slot)}", ""]
    emit(result, "\n".join(lines), args)
    return 0
