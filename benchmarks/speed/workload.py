"""A seeded synthetic agent-memory store for the latency benchmark.

Memories read like a personal assistant's store: chats, facts, tool output and preferences of
varied length, with dates, times, numbers, prices, names and places, each with ``created_at``,
``kind`` and ``source`` metadata. Questions are the kinds an assistant gets ("When is my ...?",
"How many people ...?", "Who ...?"). Candidates come from heapdb-memory's own BM25 index over
the same texts, so heaprank and heapdb-memory rank the same candidates for the same questions.
Everything is derived from one ``random.Random(seed)``: same seed, same store, same questions.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import T0

DAY = 86_400.0

NAMES = ["Anna", "Ben", "Maya", "Jordan", "Priya", "Tomás", "Chen", "Fatima", "Olek", "Sofia",
         "Kwame", "Lena", "Ravi", "Ingrid", "Diego", "Yuki"]
PLACES = ["Lisbon", "Berlin", "Porto", "Kyoto", "Denver", "Nairobi", "Oslo", "Lima", "Austin",
          "Seville", "Hanoi", "Quebec"]
TOPICS = ["flight", "dentist", "haircut", "vet", "passport", "car service", "concert",
          "interview", "rent", "physio", "dinner", "lease", "wedding", "gym class", "tax return",
          "school trip", "team offsite", "birthday party", "piano lesson", "hotel booking"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
NUMBER_WORDS = ["Two", "Three", "Four", "Six", "Nine", "Twelve"]
ADJ = ["quick", "long", "annoying", "great", "expensive", "cheap", "late", "early", "busy",
       "quiet", "stressful", "fun"]
FILLER = ["which was a bit of a mess", "as usual", "after a long week", "before the holidays",
          "with the kids in the back", "while it was raining", "which nobody expected",
          "and then we grabbed coffee", "but the traffic was terrible", "and it went fine"]
EXTRA = ["We talked for a while about {topic2} and work.", "{Name} was there too.",
         "It took most of the {part}.", "Not sure it was worth it.", "I should write this down.",
         "The place in {place} was packed.", "Prices keep going up.", "Next time I book earlier."]
PARTS = ["morning", "afternoon", "evening"]

TEMPLATES: dict[str, list[str]] = {
    "fact": ["The {topic} is confirmed for {weekday} at {hour}:{minute}",
             "{Name} booked the {topic} in {place} for {month} {day}",
             "{numword} people confirmed for the {topic}",
             "The {topic} costs ${price} in total",
             "My {topic} reference number is {digits}",
             "The {topic} moved to {place}, {Name} has the details"],
    "episode": ["I really need to sort out the {topic}, the {topic2} keeps slipping",
                "Talked with {Name} about the {topic} and the {topic2} {filler}",
                "Spent the {part} on the {topic} {filler}",
                "{Name} says {place} was {adj} but the {topic} was {adj2}",
                "Do you know a good {topic} place near {place}?",
                "Should I move the {topic} to {weekday}?"],
    "tool_result": ["Search results for {topic} in {place}: {n} options from ${lo} to ${hi}",
                    "Calendar: {topic} on {month} {day}, {hour}:00 to {hour2}:00",
                    "Weather in {place} for the {topic}: {temp} degrees and {adj} wind"],
    "preference": ["I prefer the {topic} in the {part}",
                   "I hate doing the {topic} on {weekday}s",
                   "{Name} likes {place} more than {place2}"],
    "note": ["Remember to bring the documents for the {topic}",
             "Ask {Name} about the {topic} before {weekday}"],
    "instruction": ["Always remind me about the {topic} a day before",
                    "Never book the {topic} before {hour}am"],
    "summary": ["Summary of the week: {topic}, {topic2} and {topic3}; {Name} helped with the "
                "{topic2} and the {topic} is still open"],
}
KIND_WEIGHTS = {"fact": 25, "episode": 35, "tool_result": 15, "preference": 10, "note": 8,
                "instruction": 2, "summary": 5}
SOURCES = ["user", "user", "user", "assistant", "tool"]

QUESTIONS = {
    "when": ["When is my {topic} with {Name}?", "When is the {topic} in {place}?",
             "What day is the {topic} with {Name} in {place}?"],
    "howmany": ["How many people are coming to the {topic} in {place}?",
                "How many options did {Name} find for the {topic}?"],
    "howmuch": ["How much does the {topic} in {place} cost?"],
    "who": ["Who is organising the {topic} in {place}?",
            "Who did I talk to about the {topic} on {weekday}?"],
    "where": ["Where is the {topic} with {Name}?", "Where did {Name} go for the {topic}?"],
    "what": ["What did {Name} say about the {topic}?",
             "What is my {topic} reference number for {place}?"],
    "yesno": ["Is the {topic} still on {weekday}?", "Did {Name} book the {topic} in {place}?"],
}

_DATEISH = re.compile(r"\b(?:%s|%s)\b|\d{1,2}:\d\d" % ("|".join(WEEKDAYS), "|".join(MONTHS)))
_NUMISH = re.compile(r"\d|\b(?:%s)\b" % "|".join(NUMBER_WORDS))
_NAMEISH = re.compile(r"\b(?:%s)\b" % "|".join(NAMES))
_PLACEISH = re.compile(r"\b(?:%s)\b" % "|".join(PLACES))


@dataclass(frozen=True, slots=True)
class MemoryRow:
    id: str
    namespace: str
    text: str
    kind: str
    source: str
    created_at: float


@dataclass
class Workload:
    """The store (memories per namespace) and the questions asked of it."""

    seed: int
    namespaces: list[str]
    memories: dict[str, list[MemoryRow]]
    questions: list[tuple[str, str, str]]  # (namespace, question, qtype)
    by_id: dict[str, MemoryRow] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        lengths = sorted(len(m.text.split()) for rows in self.memories.values() for m in rows)
        kinds: dict[str, int] = {}
        for rows in self.memories.values():
            for m in rows:
                kinds[m.kind] = kinds.get(m.kind, 0) + 1
        return {"seed": self.seed, "namespaces": len(self.namespaces),
                "memories": len(lengths), "questions": len(self.questions),
                "words_per_memory": {"min": lengths[0], "median": lengths[len(lengths) // 2],
                                     "max": lengths[-1]},
                "kinds": dict(sorted(kinds.items()))}


def _fill(template: str, rng: random.Random) -> str:
    topics = rng.sample(TOPICS, 3)
    places = rng.sample(PLACES, 2)
    hour = rng.randint(7, 18)
    lo = rng.randint(20, 400)
    values = {
        "topic": topics[0], "topic2": topics[1], "topic3": topics[2], "Name": rng.choice(NAMES),
        "place": places[0], "place2": places[1], "weekday": rng.choice(WEEKDAYS),
        "month": rng.choice(MONTHS), "day": rng.randint(1, 28), "hour": hour,
        "hour2": hour + rng.randint(1, 3), "minute": rng.choice(["00", "15", "30", "40", "45"]),
        "numword": rng.choice(NUMBER_WORDS), "price": rng.randint(15, 2500),
        "digits": rng.randint(100_000, 999_999), "n": rng.randint(2, 40), "lo": lo,
        "hi": lo + rng.randint(50, 900), "temp": rng.randint(-5, 35), "adj": rng.choice(ADJ),
        "adj2": rng.choice(ADJ), "filler": rng.choice(FILLER), "part": rng.choice(PARTS),
    }
    return template.format(**values)


def memory_text(kind: str, rng: random.Random) -> str:
    """One memory of ``kind``: a templated sentence, episodes often with a few more."""
    text = _fill(rng.choice(TEMPLATES[kind]), rng)
    if kind in ("episode", "summary") and rng.random() < 0.5:
        extra = [_fill(rng.choice(EXTRA), rng) for _ in range(rng.randint(1, 5))]
        text = text.rstrip(".") + ". " + " ".join(extra)
    return text


def make_workload(seed: int, namespaces: int, memories: int, questions: int) -> Workload:
    """``namespaces`` users with ``memories`` each, and ``questions`` questions spread over them."""
    rng = random.Random(seed)
    kinds, weights = list(KIND_WEIGHTS), list(KIND_WEIGHTS.values())
    names = [f"user:{i:03d}" for i in range(namespaces)]
    store: dict[str, list[MemoryRow]] = {}
    by_id: dict[str, MemoryRow] = {}
    for ns in names:
        rows = []
        for j in range(memories):
            kind = rng.choices(kinds, weights)[0]
            source = rng.choice(SOURCES) if kind != "tool_result" else "tool"
            if kind == "episode" and rng.random() < 0.3:
                source = rng.choice(NAMES).lower()
            row = MemoryRow(id=f"{ns}/m{j:05d}", namespace=ns, text=memory_text(kind, rng),
                            kind=kind, source=source,
                            created_at=T0 - rng.uniform(3.0, 180.0) * DAY)
            rows.append(row)
            by_id[row.id] = row
        store[ns] = rows
    qtypes = list(QUESTIONS)
    asked = []
    for _ in range(questions):
        qtype = rng.choice(qtypes)
        asked.append((rng.choice(names), _fill(rng.choice(QUESTIONS[qtype]), rng), qtype))
    return Workload(seed, names, store, asked, by_id)


def answers(qtype: str, text: str) -> bool:
    """Would an assistant answer a ``qtype`` question from this memory? (the simulated 'used')."""
    if qtype == "when":
        return bool(_DATEISH.search(text))
    if qtype in ("howmany", "howmuch"):
        return bool(_NUMISH.search(text))
    if qtype == "who":
        return bool(_NAMEISH.search(text[1:]))
    if qtype == "where":
        return bool(_PLACEISH.search(text))
    return not text.rstrip().endswith("?")


def pick_used(qtype: str, shown: Sequence[tuple[str, str]], rng: random.Random,
              always: bool = False) -> list[str]:
    """The simulated answer's citations among ``shown`` ``(id, text)``, best-ranked first.

    The first shown memory that could answer the question is used; 15% of answers use none and
    10% use a second one too (unless ``always``: then exactly one, the top result as fallback).
    """
    fits = [doc_id for doc_id, text in shown if answers(qtype, text)]
    if always:
        return [fits[0] if fits else shown[0][0]]
    if not fits or rng.random() < 0.15:
        return []
    return fits[:2] if len(fits) > 1 and rng.random() < 0.10 else fits[:1]
