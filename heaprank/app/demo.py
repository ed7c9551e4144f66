"""The Lisbon example: one question, ranked by plain search and by heaprank, before and after
other users' feedback. Deterministic (fixed clock, seeded simulation, explicit ids)."""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from ..reranker import Reranker
from ..scoring.candidates import Candidate

DAY = 86_400.0
T0 = 1_780_000_000.0
QUESTION = "When is my flight to Lisbon?"
MAYA = "user:maya"

#: Maya's memories from a month of chats: (id, text, day written, kind, source).
MAYA_MEMORIES = [
    ("lisbon-wish", "I have always wanted to see Lisbon, the flights there look amazing", 8,
     "episode", "maya"),
    ("lisbon-price", "Flights to Lisbon usually run $400-700 round trip", 9, "tool_result",
     "assistant"),
    ("lisbon-hood", "Which neighbourhood in Lisbon is nice for a first visit?", 9, "episode",
     "maya"),
    ("lisbon-booked", "Booked the flight: SFO to LIS, departs March 14, 9:40am", 10, "fact", "maya"),
    ("lisbon-jordan", "Jordan says Lisbon was lovely but far too hilly", 12, "episode", "jordan"),
]

TOPICS = ["dentist", "haircut", "vet", "passport", "car service", "concert", "interview",
          "rent", "physio", "flight", "dinner", "lease"]

_STOP = frozenset("a an the is my to of in on at for and or i it was be do you what when how "
                  "many much are there".split())


def _terms(text: str) -> list[str]:
    # Lower-case words with a crude plural strip, so "flights" matches "flight".
    words = re.findall(r"\w+", text.lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if w not in _STOP]


def bm25(query: str, docs: Sequence[tuple[str, str]], k1: float = 1.2,
         b: float = 0.75) -> list[tuple[str, float]]:
    """A tiny BM25 over ``(id, text)`` pairs: the plain search the demo compares against.
    Returns the matching documents, best first."""
    tokenised = [(doc_id, _terms(text)) for doc_id, text in docs]
    avg = sum(len(t) for _, t in tokenised) / max(len(tokenised), 1)
    df = Counter(term for _, t in tokenised for term in set(t))
    n = len(tokenised)
    out = []
    for doc_id, terms in tokenised:
        tf = Counter(terms)
        score = 0.0
        for term in set(_terms(query)):
            if tf[term]:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(terms) / avg))
        if score > 0:
            out.append((doc_id, score))
    return sorted(out, key=lambda pair: (-pair[1], pair[0]))


@dataclass
class Store:
    """The app's own memory store (heaprank never keeps documents): text and metadata by id."""

    docs: dict[str, dict[str, Candidate]]

    def add(self, namespace: str, doc_id: str, text: str, **metadata: Any) -> None:
        self.docs.setdefault(namespace, {})[doc_id] = Candidate(doc_id, text, metadata=metadata)

    def search(self, namespace: str, query: str) -> list[Candidate]:
        pool = self.docs[namespace]
        hits = bm25(query, [(d, c.text) for d, c in pool.items()])
        return [Candidate(d, pool[d].text, score, pool[d].metadata) for d, score in hits]



def _show(out: TextIO, label: str, rows: Sequence[tuple[float, str]]) -> None:
    for rank, (score, text) in enumerate(rows, start=1):
        out.write(f"  {label:<9}{rank}. {score:.3f}  {text}\n")
        label = ""


def compare(rr: Reranker, store: Store, out: TextIO, now: float) -> Any:
    """Print plain search and heaprank for Maya's question; return heaprank's ranking."""
    cands = store.search(MAYA, QUESTION)
    top = max(c.score or 0.0 for c in cands)
    out.write(f"Q: {QUESTION}\n")
    _show(out, "search", [((c.score or 0.0) / top, c.text) for c in cands[:3]])
    ranking = rr.rerank(QUESTION, cands, namespace=MAYA, k=3, now=now, track=False)
    _show(out, "heaprank", [(r.score, r.candidate.text) for r in ranking])
    return ranking


def simulate_other_users(rr: Reranker, store: Store, seed: int = 7) -> int:
    """40 other users ask "when" and "how many" questions about other topics and report the
    memory the answer used. Returns how many feedbacks were given."""
    rng = random.Random(seed)
    given = 0
    for user in range(40):
        ns, t = f"user:{user:02d}", T0 + rng.uniform(0, 25) * DAY
        for topic in rng.sample(TOPICS, 3):
            word = topic.split()[-1]
            slug = topic.replace(" ", "-")
            store.add(ns, f"{slug}-chat", f"I really need to sort out the {topic}, the {word} "
                      f"keeps slipping", kind="episode", source="user", created_at=t)
            store.add(ns, f"{slug}-ask", f"Do you know a good {topic} place near the office?",
                      kind="episode", source="user", created_at=t)
            store.add(ns, f"{slug}-tip", f"A {topic} booking is easy to move online",
                      kind="tool_result", source="assistant", created_at=t)
            if rng.random() < 0.5:
                question = f"When is my {topic}?"
                day = rng.choice(["Monday", "Tuesday", "Friday"])
                answer = f"The {topic} is confirmed for {day} at {rng.randint(9, 17)}:00"
            else:
                question = f"How many people are coming to the {topic}?"
                answer = f"{rng.choice(['Four', 'Six', 'Nine'])} confirmed for the {topic}"
            store.add(ns, f"{slug}-answer", answer, kind="fact", source="user", created_at=t)
            ranking = rr.rerank(question, store.search(ns, question), namespace=ns, k=4, now=t + DAY)
            used = [f"{slug}-answer"] if f"{slug}-answer" in ranking.ids else []
            rr.feedback(ranking.recall_id, used=used)
            given += bool(used)
    return given


def run(out: TextIO, state: str | None = None) -> Reranker:
    """Run the whole story, printing to ``out``; returns the reranker (for tests)."""
    rr = Reranker(state)
    store = Store({})
    for doc_id, text, day, kind, source in MAYA_MEMORIES:
        store.add(MAYA, doc_id, text, kind=kind, source=source, created_at=T0 + day * DAY)
    now = T0 + 30 * DAY

    out.write("=== 1. Day one: no feedback anywhere yet ===\n")
    compare(rr, store, out, now)

    sessions = simulate_other_users(rr, store)
    out.write(f"\n=== 2. After {sessions} answers used by 40 other users (none by Maya, "
              f"none about Lisbon) ===\n")
    ranking = compare(rr, store, out, now)
    out.write("\nEXPLAIN, heaprank's order:\n")
    for r in ranking:
        out.write(f"  {r.rank}. {r.id:<14} {r.explain()}\n")
    out.write("\nStrongest learned links, all users pooled "
              f"(prior mean {rr.config.learning.prior.mean:.3f}):\n")
    for link in rr.links("*")[:6]:
        out.write(f"  {link.feature:<26} P(useful) {link.p:.3f}  (n {link.n:.0f}, "
                  f"90% {link.low:.3f}-{link.high:.3f})\n")
    return rr
