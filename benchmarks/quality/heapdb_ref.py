"""The reference system, ``heapdb-memory==0.1.0``, under the same LoCoMo protocol: :func:`build_store`
builds a store of some conversations, :func:`recall` and :func:`feedback` time one call each.

Each turn is added with ``id = "sample_id:dia_id"`` (its ids are global, not per namespace),
``namespace = sample_id``, ``kind = "episode"`` (a dialog turn; every turn has the same kind, so
the kind prior is a constant factor), ``source`` = the speaker and ``created_at`` = the session's
date. heapdb-memory retrieves its own candidates (its BM25 top 50, plus its cosine top 50 when an
embedder is given) and ranks all of them (``k = 100``), scored on the full list like heaprank.

Configurations (the reference's own names in its RESULTS.md in brackets):

- ``bm25``: ``w_recency = w_importance = w_usefulness = 0`` [bm25, or bm25+embedding];
- ``defaults``: its default ScoringConfig, no feedback anywhere [heapdb];
- ``learned``: defaults after feedback from the other conversations [heapdb+learned];
- ``learned_norecency``: the same store scored with ``w_recency = 0``, the reference's best
  untuned-by-grid variant (it reports about 0.497 MRR).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .harness.data import CandidateList, Dataset, Question
from .harness.metrics import score_ranking
from .harness.runner import cited, feedback_noise

RECALL_K = 100
SHOWN_K = 10


def mem_id(data: Dataset, conv: int, turn: int) -> str:
    c = data.conversations[conv]
    return f"{c.sample_id}:{c.turns[turn].id}"


class CachedEmbedder:
    """heapdb-memory's Embedder protocol over vectors this run already computed (MiniLM)."""

    name = "st:all-MiniLM-L6-v2"

    def __init__(self, texts: dict[str, np.ndarray], encode: Callable[[list[str]], np.ndarray]):
        self._cache = texts
        self._encode = encode

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self._cache]
        if missing:
            for t, v in zip(missing, self._encode(list(missing))):
                self._cache[t] = v
        return [self._cache[t].astype(np.float64).tolist() for t in texts]


def configs() -> dict[str, Any]:
    from heapdb_memory import ScoringConfig

    return {
        "bm25": ScoringConfig(w_recency=0.0, w_importance=0.0, w_usefulness=0.0),
        "defaults": ScoringConfig(),
        "learned": ScoringConfig(),
        "learned_norecency": ScoringConfig(w_recency=0.0),
    }


def build_store(data: Dataset, conversations: Sequence[int], *, embedder: Any = None,
                config: Any = None) -> Any:
    """A heapdb-memory store holding every turn of ``conversations``, one namespace each."""
    from heapdb_memory import Memory

    mem = Memory(config=config, embedder=embedder, clock=lambda: 0.0)
    for ci in conversations:
        conv = data.conversations[ci]
        mem.add_many([{"text": t.text, "kind": "episode", "source": t.speaker,
                       "namespace": conv.sample_id, "created_at": t.created_at,
                       "id": mem_id(data, ci, t.index)} for t in conv.turns])
    return mem


@dataclass(slots=True)
class Timer:
    """Wall-clock seconds and counts of recall and feedback calls."""

    recall_s: float = 0.0
    recalls: int = 0
    feedback_s: float = 0.0
    feedbacks: int = 0
    build_s: float = 0.0
    builds: int = 0
    recall_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        ms = np.array(self.recall_ms) if self.recall_ms else np.zeros(1)
        return {
            "recalls": self.recalls,
            "recall_mean_ms": round(1000 * self.recall_s / max(self.recalls, 1), 3),
            "recall_p50_ms": round(float(np.percentile(ms, 50)), 3),
            "recall_p95_ms": round(float(np.percentile(ms, 95)), 3),
            "feedbacks": self.feedbacks,
            "feedback_mean_ms": round(1000 * self.feedback_s / max(self.feedbacks, 1), 3),
            "store_builds": self.builds,
            "store_build_mean_s": round(self.build_s / max(self.builds, 1), 3),
        }


def recall(mem: Any, q: Question, data: Dataset, now: float, *, k: int, config: Any,
           track: bool, timer: Timer | None = None) -> Any:
    """One timed ``Memory.recall`` in the question's namespace."""
    ns = data.conversations[q.conv].sample_id
    t0 = time.perf_counter()
    res = mem.recall(q.text, k=k, namespace=ns, now=now, explain=False, config=config,
                     track=track)
    if timer is not None:
        dt = time.perf_counter() - t0
        timer.recall_s += dt
        timer.recalls += 1
        timer.recall_ms.append(1000 * dt)
    return res


def feedback(mem: Any, res: Any, used: Sequence[str], now: float,
             timer: Timer | None = None) -> None:
    """One timed ``Memory.feedback``: ``used`` confirmed, every other shown item rejected."""
    t0 = time.perf_counter()
    mem.feedback(used=list(used), recall_id=res.recall_id, now=now)
    if timer is not None:
        timer.feedback_s += time.perf_counter() - t0
        timer.feedbacks += 1


class HeapdbRunner:
    """The reference's rows, question for question, under the heaprank protocol."""

    def __init__(self, data: Dataset, times: Sequence[float], *, seed: int,
                 order: Sequence[int], embedder: Any = None,
                 tick: Callable[[int], object] | None = None) -> None:
        self.data = data
        self.times = list(times)
        self.seed = seed
        self.order = list(order)
        self.embedder = embedder
        self.tick = tick or (lambda n: None)
        self.timer = Timer()
        self.evidence = [frozenset(mem_id(data, q.conv, t) for t in q.evidence)
                         for q in data.questions]

    def build(self, conversations: Sequence[int]) -> Any:
        t0 = time.perf_counter()
        mem = build_store(self.data, conversations, embedder=self.embedder)
        self.timer.build_s += time.perf_counter() - t0
        self.timer.builds += 1
        return mem

    def train(self, mem: Any, fold: int, mode: str) -> None:
        for qi in self.order:
            q = self.data.questions[qi]
            if q.conv == fold:
                continue
            self.tick(1)
            answers, rng = feedback_noise(mode, self.seed, fold, qi)
            if not answers:
                continue
            now = self.times[q.conv]
            res = recall(mem, q, self.data, now, k=SHOWN_K, config=None, track=True,
                         timer=self.timer)
            feedback(mem, res, cited(rng, res.ids, self.evidence[qi]), now, timer=self.timer)

    def evaluate(self, mem: Any, questions: Sequence[int], config: Any
                 ) -> list[tuple[float, dict[int, float]]]:
        out = []
        for qi in questions:
            q = self.data.questions[qi]
            self.tick(1)
            res = recall(mem, q, self.data, self.times[q.conv], k=RECALL_K, config=config,
                         track=False, timer=self.timer)
            out.append(score_ranking(res.ids, self.evidence[qi]))
        return out


def candidate_lists(mem: Any, data: Dataset, times: Sequence[float], config: Any,
                    k: int = RECALL_K) -> list[Any]:
    """heapdb-memory's own candidates for every question, in its order, scored by its relevance
    (BM25 / max BM25, or its hybrid relevance with an embedder): heaprank can then re-rank
    exactly what heapdb-memory ranks, which separates re-ranking from retrieval."""
    out = []
    for q in data.questions:
        conv = data.conversations[q.conv]
        res = mem.recall(q.text, k=k, namespace=conv.sample_id, now=times[q.conv],
                         explain=False, config=config, track=False)
        turns = np.array([conv.ids[r.id.split(":", 1)[1]] for r in res], dtype=np.int64)
        out.append(CandidateList(turns, np.array([r.relevance for r in res], dtype=np.float64)))
    return out
