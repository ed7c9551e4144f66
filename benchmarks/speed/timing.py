"""Timing helpers, the two systems and the timed phases of ``python -m benchmarks latency``."""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import T0
from .workload import DAY, Workload, pick_used

K = 10  # results shown per rerank / recall (the "top k" an assistant puts in its prompt)
RERANK_MODES = (  # (name, k (None: k = n), explain() on every returned result)
    ("rerank", K, False),
    ("rerank+explain", K, True),
    ("rerank+explain k=n", None, True),
)


# --------------------------------------------------------------------------- timing


def summarize(samples_ns: Sequence[int]) -> dict[str, Any]:
    """p50 / p95 / mean / min in milliseconds of per-call times in nanoseconds."""
    import numpy as np

    ms = np.asarray(samples_ns, dtype=np.float64) / 1e6
    return {"reps": int(ms.size), "p50_ms": float(np.percentile(ms, 50)),
            "p95_ms": float(np.percentile(ms, 95)), "mean_ms": float(ms.mean()),
            "min_ms": float(ms.min())}


def interleave(calls: dict[str, Callable[[int], Any]], reps: int, warmup: int,
               bar: Any = None, clock: Callable[[], int] = time.perf_counter_ns
               ) -> dict[str, list[int]]:
    """Time each call ``reps`` times, rotating their order every repetition (``clock`` in
    nanoseconds: wall time by default).

    ``calls[name](i)`` does the work for repetition ``i`` (the argument picks the question) and
    may return a callable: then only the returned callable is timed (setup stays outside).
    Anything else it returns is released after the clock stops.
    """
    names = list(calls)
    out: dict[str, list[int]] = {name: [] for name in names}
    gc.collect()
    for i in range(-warmup, reps):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            work = calls[name]
            t0 = clock()
            result = work(i)
            t1 = clock()
            if callable(result):
                t0 = clock()
                result = result()
                t1 = clock()
            if i >= 0:
                out[name].append(t1 - t0)
            del result  # whatever the call returned is freed outside the timed region
        if bar is not None:
            bar.update(1)
    return out


def interleave_blocks(calls: dict[str, Callable[[int], Any]], reps: int, block: int,
                      warmup: int) -> dict[str, list[int]]:
    """:func:`interleave` by blocks: ``block`` calls of one system back to back, then the
    next system's ``block`` (the same questions), rotating which goes first. Each system runs
    with its own code and data in the CPU caches, as in a process that does only that call,
    while a load that changes over seconds still slows them alike."""
    names = list(calls)
    out: dict[str, list[int]] = {name: [] for name in names}
    gc.collect()
    for b, start in enumerate(range(-warmup, reps, block)):
        shift = b % len(names)
        for name in names[shift:] + names[:shift]:
            for i in range(start, min(start + block, reps)):
                t0 = time.perf_counter_ns()
                result = calls[name](i)
                t1 = time.perf_counter_ns()
                if callable(result):
                    t0 = time.perf_counter_ns()
                    result = result()
                    t1 = time.perf_counter_ns()
                if i >= 0:
                    out[name].append(t1 - t0)
                del result
    return out


def memory_probe(mb: int = 64, steps: int = 200_000) -> float:
    """Nanoseconds per step of a pointer chase through ``mb`` megabytes (an array of the next
    index, in one random cycle: each step one dependent read past the CPU caches): how slow this
    machine's memory is right now. On a shared host it changes from minute to minute, and a
    rerank on cold caches with it, which the load average does not show."""
    from array import array

    import numpy as np

    n = mb * 2**20 // 8
    order = np.random.default_rng(0).permutation(n)
    nxt = np.empty(n, dtype=np.int64)
    nxt[order[:-1]] = order[1:]
    nxt[order[-1]] = order[0]
    chain = array("q", nxt.tobytes())
    at, t0 = 0, time.perf_counter_ns()
    for _ in range(steps):
        at = chain[at]
    return (time.perf_counter_ns() - t0) / steps


class Evictor:
    """Reads ``mb`` megabytes (a numpy sum) to push the caller's code and data out of the CPU
    caches; ``mb=0`` does nothing."""

    def __init__(self, mb: float) -> None:
        import numpy as np

        self.buffer = np.ones(int(mb * 2**20 / 8)) if mb > 0 else None

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.sum()

    def before(self, call: Callable[[int], Any]) -> Callable[[int], Any]:
        """``call`` for :func:`interleave` with the caches evicted first, outside the timed
        region (interleave times only the callable a call returns)."""
        if self.buffer is None:
            return call

        def cold(i: int) -> Callable[[], Any]:
            self()
            return lambda: call(i)
        return cold


# --------------------------------------------------------------------------- the systems


class Retriever:
    """BM25 top ``n`` per namespace with heapdb-memory's own index and terms.

    Falls back to a plain term-overlap score when heapdb-memory is not installed (then the
    side-by-side comparison is skipped anyway).
    """

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.recent = {ns: sorted(rows, key=lambda m: (-m.created_at, m.id))
                       for ns, rows in workload.memories.items()}
        try:
            from heapdb_memory import BM25Index
            from heapdb_memory.text import terms
        except ImportError:  # pragma: no cover - exercised without the bench extra
            BM25Index, terms = None, None
        self.terms = terms
        self.index: dict[str, Any] = {}
        if BM25Index is not None:
            for ns, rows in workload.memories.items():
                idx = self.index[ns] = BM25Index()
                for m in rows:  # same order and terms as heapdb-memory's Memory.add
                    idx.add(m.id, terms(m.text))

    def bm25(self, namespace: str, question: str, n: int) -> list[tuple[str, float]]:
        if self.terms is None:
            words = set(question.lower().split())
            scored = [(m.id, float(len(words & set(m.text.lower().split()))))
                      for m in self.workload.memories[namespace]]
            scored = [s for s in scored if s[1] > 0]
            scored.sort(key=lambda s: (-s[1], s[0]))
            return scored[:n]
        return self.index[namespace].top(self.terms(question), n)

    def top(self, namespace: str, question: str, n: int) -> list[tuple[str, float]]:
        """BM25 top ``n``, filled up with recent non-matching memories at score 0."""
        hits = self.bm25(namespace, question, n)
        if len(hits) < n:
            seen = {doc_id for doc_id, _ in hits}
            extra = [(m.id, 0.0) for m in self.recent[namespace] if m.id not in seen]
            hits = hits + extra[:n - len(hits)]
        return [(doc_id, float(score)) for doc_id, score in hits]

    def candidates(self, namespace: str, question: str, n: int) -> list[Any]:
        return to_candidates(self.workload, self.top(namespace, question, n))


def to_candidates(workload: Workload, scored: Sequence[tuple[str, float]]) -> list[Any]:
    from heaprank import Candidate

    out = []
    for doc_id, score in scored:
        m = workload.by_id[doc_id]
        out.append(Candidate(id=m.id, text=m.text, score=score,
                             metadata={"created_at": m.created_at, "kind": m.kind,
                                       "source": m.source}))
    return out


def heapdb_store(workload: Workload) -> Any:
    """A heapdb-memory ``Memory`` holding the same memories (ids, kinds, sources, times)."""
    from heapdb_memory import Memory

    mem = Memory(clock=lambda: T0)
    for ns in workload.namespaces:
        mem.add_many([{"text": m.text, "kind": m.kind, "source": m.source, "namespace": ns,
                       "created_at": m.created_at, "id": m.id}
                      for m in workload.memories[ns]])
    return mem


def heapdb_config(n: int) -> Any:
    from heapdb_memory import ScoringConfig

    return ScoringConfig(candidates=n)


def _step(count: int) -> float:
    """Seconds between warm-up questions: all of them within the two days before ``T0``."""
    return min(60.0, 2 * DAY / max(count, 1))


class NoProgress:
    """A progress bar that shows nothing, for the warm-ups of callers without one."""

    def update(self, _: int) -> None:
        pass


def warm_heaprank(rr: Any, retriever: Retriever, questions: Sequence[tuple[str, str, str]],
                  seed: int, bar: Any) -> int:
    """rerank 50 -> top 10 -> feedback for each question; returns the feedbacks given."""
    rng = random.Random(seed)
    for i, (ns, q, qtype) in enumerate(questions):
        now = T0 - (len(questions) - i) * _step(len(questions))
        ranking = rr.rerank(q, retriever.candidates(ns, q, 50), namespace=ns, k=K, now=now)
        used = pick_used(qtype, [(r.id, r.candidate.text) for r in ranking], rng)
        rr.feedback(ranking.recall_id, used=used, now=now)
        bar.update(1)
    return len(questions)


def warm_heapdb(mem: Any, questions: Sequence[tuple[str, str, str]], seed: int, bar: Any) -> int:
    rng = random.Random(seed)
    for i, (ns, q, qtype) in enumerate(questions):
        now = T0 - (len(questions) - i) * _step(len(questions))
        res = mem.recall(q, k=K, namespace=ns, now=now)
        used = pick_used(qtype, [(r.id, r.text) for r in res], rng)
        mem.feedback(used=used, recall_id=res.recall_id, now=now)
        bar.update(1)
    return len(questions)


# --------------------------------------------------------------------------- phases


def rerank_call(rr: Any, cands: Sequence[tuple[str, str, list[Any]]], k: int,
                 explain: bool) -> Callable[[int], None]:
    def call(i: int) -> Any:
        ns, q, candidates = cands[i % len(cands)]
        ranking = rr.rerank(q, candidates, namespace=ns, k=k, now=T0)
        if explain:
            for item in ranking:
                item.explain()
        return ranking  # freed outside the timed region, like the recall result
    return call


def _recall_call(mem: Any, timed: Sequence[tuple[str, str, str]], config: Any,
                 pools: list[int]) -> Callable[[int], None]:
    def call(i: int) -> Any:
        ns, q, _ = timed[i % len(timed)]
        res = mem.recall(q, k=K, namespace=ns, now=T0, config=config)
        for item in res:
            item.explain()
        pools.append(res.candidates)
        return res
    return call


def time_rerank(rr: Any, backend: str, retriever: Retriever, timed: Sequence[tuple[str, str, str]],
                cfg: dict[str, Any], mem: Any, bar: Any) -> tuple[list[dict], list[dict]]:
    """Rerank latency per size and mode; heapdb-memory's recall interleaved when ``mem``."""
    rows, reference = [], []
    for n in cfg["sizes"]:
        cands = [(ns, q, retriever.candidates(ns, q, n)) for ns, q, _ in timed]
        calls = {name: rerank_call(rr, cands, k or n, explain)
                 for name, k, explain in RERANK_MODES}
        pools: list[int] = []
        if mem is not None:
            calls["heapdb recall"] = _recall_call(mem, timed, heapdb_config(n), pools)
        samples = interleave(calls, cfg["reps"][n], cfg["warmup"], bar)
        given = sum(len(c) for _, _, c in cands) / len(cands)
        for name, k, explain in RERANK_MODES:
            rows.append({"system": "heaprank", "backend": backend, "n": n, "candidates": given,
                         "mode": name, "k": min(k or n, round(given)), "explain": explain,
                         **summarize(samples[name])})
        if mem is not None:
            reference.append({"system": "heapdb-memory", "n": n, "mode": "recall+explain",
                              "k": K, "explain": True,
                              "pool_mean": sum(pools) / max(len(pools), 1),
                              **summarize(samples["heapdb recall"])})
    return rows, reference


def _ratio(num: dict[str, Any], den: dict[str, Any]) -> dict[str, float]:
    return {"p50": num["p50_ms"] / den["p50_ms"], "mean": num["mean_ms"] / den["mean_ms"]}


def side_by_side(rr: Any, mem: Any, retriever: Retriever, timed: Sequence[tuple[str, str, str]],
                 cfg: dict[str, Any], bar: Any) -> dict[str, Any]:
    """heapdb-memory recall vs heaprank at 50 candidates, k=10, EXPLAIN, interleaved."""
    n = 50
    cands = [(ns, q, retriever.candidates(ns, q, n)) for ns, q, _ in timed]
    same = _same_candidates(mem, retriever, timed, n)

    def pipeline(i: int) -> Any:
        ns, q, _ = timed[i % len(timed)]
        ranking = rr.rerank(q, to_candidates(retriever.workload, retriever.top(ns, q, n)),
                            namespace=ns, k=K, now=T0)
        for item in ranking:
            item.explain()
        return ranking

    calls = {
        "heapdb-memory recall+explain": _recall_call(mem, timed, heapdb_config(n), []),
        "bm25 top-50 alone": lambda i: retriever.bm25(timed[i % len(timed)][0],
                                                      timed[i % len(timed)][1], n),
        "heaprank rerank+explain": rerank_call(rr, cands, K, True),
        "heaprank bm25 + rerank+explain": pipeline,
    }
    samples = interleave(calls, cfg["side_reps"], cfg["warmup"], bar)
    rows = {name: summarize(s) for name, s in samples.items()}
    recall, bm25 = rows["heapdb-memory recall+explain"], rows["bm25 top-50 alone"]
    mine, both = rows["heaprank rerank+explain"], rows["heaprank bm25 + rerank+explain"]
    ranking_only = {"p50_ms": recall["p50_ms"] - bm25["p50_ms"],
                    "mean_ms": recall["mean_ms"] - bm25["mean_ms"]}
    return {"n": n, "k": K, "backend": "memory", "questions": len(timed),
            "same_candidates": same, "rows": rows,
            "ratios": {
                "recall / heaprank rerank+explain": _ratio(recall, mine),
                "recall / (bm25 + heaprank rerank+explain)": _ratio(recall, both),
                "(recall - bm25) / heaprank rerank+explain": _ratio(ranking_only, mine),
            },
            "cache_conditions": cache_conditions(rr, mem, timed, cands, cfg, bar)}


def backends_side_by_side(memory_rr: Any, sqlite_rr: Any, retriever: Retriever,
                          timed: Sequence[tuple[str, str, str]], cfg: dict[str, Any],
                          bar: Any) -> dict[str, Any]:
    """heaprank on the memory backend and on SQLite (its default, durable mode), rerank +
    EXPLAIN of 50 candidates, k=10, the same questions, call by call: their ratio is measured
    side by side, as the per-size cells above (one backend at a time, minutes apart, the
    memory one between heapdb-memory's recalls) cannot give it."""
    n = 50
    cands = [(ns, q, retriever.candidates(ns, q, n)) for ns, q, _ in timed]
    calls = {"memory rerank+explain": rerank_call(memory_rr, cands, K, True),
             "sqlite rerank+explain": rerank_call(sqlite_rr, cands, K, True)}
    samples = interleave(calls, cfg["side_reps"], cfg["warmup"], bar)
    rows = {name: summarize(s) for name, s in samples.items()}
    return {"n": n, "k": K, "questions": len(timed), "rows": rows,
            "ratio": _ratio(rows["sqlite rerank+explain"], rows["memory rerank+explain"])}


#: Calls of one system back to back in the "warm" condition; megabytes read before every call
#: in the "cold" one (past this machine's L2, as heapdb-memory's recall reads between calls).
WARM_BLOCK = 32
EVICT_MB = 8.0


def cache_conditions(rr: Any, mem: Any, timed: Sequence[tuple[str, str, str]],
                     cands: Sequence[tuple[str, str, list[Any]]], cfg: dict[str, Any],
                     bar: Any) -> list[dict[str, Any]]:
    """heapdb-memory's recall + EXPLAIN and heaprank's rerank + EXPLAIN (50 candidates) under
    the two symmetric cache conditions, beside the call-by-call block above (where each
    heaprank call follows a recall that evicted its caches, and not the other way round):
    ``warm``, each system's calls back to back in blocks (:func:`interleave_blocks`);
    ``cold``, the caches evicted before every call of either system (:class:`Evictor`)."""
    names = ("heapdb-memory recall+explain", "heaprank rerank+explain")
    calls = dict(zip(names, (_recall_call(mem, timed, heapdb_config(50), []),
                             rerank_call(rr, cands, K, True))))
    reps = cfg["side_reps"]
    evict = Evictor(EVICT_MB)
    measured = {
        f"warm (blocks of {WARM_BLOCK} calls)": interleave_blocks(calls, reps, WARM_BLOCK,
                                                                  cfg["warmup"]),
        f"cold ({EVICT_MB:g} MB read before every call)": interleave(
            {name: evict.before(call) for name, call in calls.items()}, reps, cfg["warmup"]),
    }
    out = []
    for condition, samples in measured.items():
        recall, mine = summarize(samples[names[0]]), summarize(samples[names[1]])
        out.append({"condition": condition, "reps": reps, "recall": recall, "rerank": mine,
                    "ratio": _ratio(recall, mine)})
        if bar is not None:
            bar.update(0)
    return out


def _same_candidates(mem: Any, retriever: Retriever, timed: Sequence[tuple[str, str, str]],
                     n: int) -> bool:
    """Does heapdb-memory's pool hold the same ``n`` memories heaprank is given?"""
    for ns, q, _ in timed:
        res = mem.recall(q, k=n, namespace=ns, now=T0, config=heapdb_config(n), track=False)
        if res.candidates != n or set(res.ids) != {d for d, _ in retriever.bm25(ns, q, n)}:
            return False
    return True


def feedback_call(rr: Any, cands: Sequence[tuple[str, str, list[Any]]],
                   qtypes: Sequence[str], seed: int) -> Callable[[int], Callable[[], Any]]:
    rng = random.Random(seed)

    def call(i: int) -> Callable[[], Any]:
        ns, q, candidates = cands[i % len(cands)]
        ranking = rr.rerank(q, candidates, namespace=ns, k=K, now=T0)
        used = pick_used(qtypes[i % len(qtypes)], [(r.id, r.candidate.text) for r in ranking],
                         rng, always=True)
        return lambda: rr.feedback(ranking.recall_id, used=used, now=T0)
    return call


def _heapdbfeedback_call(mem: Any, timed: Sequence[tuple[str, str, str]],
                          seed: int) -> Callable[[int], Callable[[], Any]]:
    rng = random.Random(seed)

    def call(i: int) -> Callable[[], Any]:
        ns, q, qtype = timed[i % len(timed)]
        res = mem.recall(q, k=K, namespace=ns, now=T0)
        used = pick_used(qtype, [(r.id, r.text) for r in res], rng, always=True)
        return lambda: mem.feedback(used=used, recall_id=res.recall_id, now=T0)
    return call


def time_feedback(systems: dict[str, Any], mem: Any, retriever: Retriever,
                  timed: Sequence[tuple[str, str, str]], cfg: dict[str, Any],
                  bar: Any) -> list[dict[str, Any]]:
    """Feedback (1 used, 9 ignored of 10 shown) after an untimed rerank, interleaved."""
    cands = [(ns, q, retriever.candidates(ns, q, 50)) for ns, q, _ in timed]
    qtypes = [t for _, _, t in timed]
    calls = {label: feedback_call(rr, cands, qtypes, cfg["seed"])
             for label, (rr, _, _) in systems.items()}
    if mem is not None:
        calls["heapdb-memory"] = _heapdbfeedback_call(mem, timed, cfg["seed"])
    samples = interleave(calls, cfg["feedback_reps"], cfg["warmup"], bar)
    rows = []
    for label, s in samples.items():
        backend, durability = (systems[label][1:] if label in systems else ("memory", "in-process"))
        stats = summarize(s)
        rows.append({"system": "heapdb-memory" if label == "heapdb-memory" else "heaprank",
                     "backend": backend, "durability": durability, **stats,
                     "per_s": 1000.0 / stats["mean_ms"]})
    return rows
