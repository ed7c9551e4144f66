"""Where heaprank's rerank and feedback time goes, on the latency benchmark's workload.

Install and run (from the repository root)::

    pip install -e . -r benchmarks/requirements.txt
    python -m benchmarks profile-rerank [--n 50] [--calls 2000] [--backend memory] [--top 25]
    python -m benchmarks profile-rerank --against ../heaprank-at-b78c230   # before / after

Builds the same seeded store as ``python -m benchmarks latency`` (BM25 candidates from
heapdb-memory's index, a few thousand warm-up feedbacks so links exist), then runs ``cProfile``
over ``--calls`` calls of ``rerank(n candidates, k=10)`` + ``explain()`` on every result, and
separately over feedback (1 used + 9 ignored), each right after its rerank as the latency
benchmark times it (``--stages``: after all the reranks, so its link means are read again).
Prints each function's share of the profiled time, by own time and by cumulative time.
cProfile inflates call-heavy code; read the shares, not the totals.
Objects built before the timed calls are frozen out of the garbage collector (``gc.freeze``),
as in the latency benchmark.

``--against DIR`` times this checkout and another one side by side in one process instead:
``DIR/heaprank`` is loaded under another module name, both are warmed with the same feedback,
and their calls are interleaved call by call (rerank + EXPLAIN of 50 and 1,000 candidates,
feedback), so a busy machine slows both alike. ``--cpu`` times thread CPU time instead of
wall time (steadier when other processes compete for the cores). ``--group G`` also times
``feedback_many`` of G feedbacks (G reranks untimed before each), per feedback: with
``--backend sqlite``, one transaction for the G.

``--cold MB`` reads a buffer of that many megabytes before every timed call (outside the
timing), evicting the CPU caches as heapdb-memory's recall does between heaprank's calls in the
latency benchmark's side-by-side block: the figures are then the cold-cache ones that block
judges by (a rerank of 50 takes ~1.5x its warm time here with 2 MB or more).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.util
import inspect
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from heaprank import Config, Refit, Reranker
from heaprank.scoring.space import FeatureSpace

from .. import T0
from . import timing
from .timing import Evictor, K, NoProgress, Retriever, warm_heaprank
from .workload import make_workload, pick_used


class StageTimer:
    """Inclusive wall time of named stages, by wrapping functions (about 0.3 us per call, far
    less than cProfile's per-call cost). Only attributes that exist are wrapped."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, attr: str, label: str) -> None:
        original = getattr(owner, attr, None)
        if original is None:
            return
        ns, calls = self.ns, self.calls
        ns.setdefault(label, 0)
        calls.setdefault(label, 0)

        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                ns[label] += time.perf_counter_ns() - t0
                calls[label] += 1

        def timed_flow(*args, **kwargs):  # type: ignore[no-untyped-def]
            # A flow (a generator whose state calls are requests): timed from its first step to
            # its result, the requests it yields included.
            t0 = time.perf_counter_ns()
            try:
                return (yield from original(*args, **kwargs))
            finally:
                ns[label] += time.perf_counter_ns() - t0
                calls[label] += 1

        if inspect.isgeneratorfunction(original):
            timed = timed_flow

        raw = vars(owner).get(attr, original) if hasattr(owner, "__dict__") else original
        self._undo.append((owner, attr, raw))
        setattr(owner, attr, staticmethod(timed) if isinstance(raw, staticmethod) else timed)

    def restore(self) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo.clear()

    def report(self, title: str, total_label: str) -> None:
        total = self.ns[total_label]
        print(f"\n== {title}: stage shares of {total_label} "
              f"({total / max(self.calls[total_label], 1) / 1e3:.1f} us per call, wall clock)")
        for label, value in sorted(self.ns.items(), key=lambda kv: -kv[1]):
            if label == total_label:
                continue
            per = value / max(self.calls[total_label], 1) / 1e3
            print(f"{100 * value / total:6.1f}%  {per:8.1f} us/call  {label}")


def stage_rerank(rr: Reranker, cands: list, calls: int, evict: Evictor) -> None:
    import heaprank.reranker as R
    import heaprank.scoring.results as results
    import heaprank.scoring.signals as sig

    st = StageTimer()
    import heaprank.model.links as links

    st.wrap(R, "coerce_candidates", "coerce_candidates (validate + convert)")
    st.wrap(R, "analyze_query", "analyze_query")
    st.wrap(FeatureSpace, "query", "FeatureSpace.query (analyze_query, cached)")
    st.wrap(Reranker, "_feature_rows", "_feature_rows (neighbours + shape cache + rows)")
    st.wrap(Reranker, "_row_links", "_row_links (links kept, or read + posterior)")
    st.wrap(rr.state, "read", "  of which state.read (links of both layers + documents)")
    st.wrap(rr.state, "read_docs", "  of which state.read_docs (links kept: documents only)")
    st.wrap(links, "posterior", "  of which links.posterior")
    st.wrap(links, "noisy_or", "  of which links.noisy_or")
    st.wrap(rr.state, "put_impression", "state.put_impression (encode + store)")
    for name in ("relevance", "recency", "importance", "combine"):
        st.wrap(sig, name, f"signals.{name}")
    st.wrap(R, "apply_rules", "apply_rules")
    st.wrap(Reranker, "_build_items", "_build_items (Ranked objects)")
    st.wrap(results.Ranked, "explain", "Ranked.explain (10 per call)")
    _wrap_stages(st)
    st.wrap(Reranker, "rerank", "rerank")
    try:
        for i in range(calls):
            ns, q, _, c = cands[i % len(cands)]
            evict()
            for item in rr.rerank(q, c, namespace=ns, k=K, now=T0):
                item.explain()
    finally:
        st.restore()
    # explain() runs outside rerank: count it against the rerank+explain total
    st.ns["rerank + explain"] = st.ns.pop("rerank") + st.ns["Ranked.explain (10 per call)"]
    st.calls["rerank + explain"] = st.calls.pop("rerank")
    st.report("rerank + explain", "rerank + explain")


def _wrap_stages(st: StageTimer) -> None:
    """The pipeline stages of the layout with ``heaprank/scoring/`` and ``learning/`` (an older
    checkout has none of them, and nothing is wrapped)."""
    try:
        from heaprank.learning import evidence, impressions
        from heaprank.scoring import candidates, explain, results, scorer, space
    except ImportError:
        return
    st.wrap(scorer.Scorer, "see", "Scorer.see (candidates + query + feature rows)")
    st.wrap(candidates, "coerce_candidates", "  of which coerce_candidates")
    st.wrap(space.FeatureSpace, "rows", "  of which FeatureSpace.rows")
    st.wrap(evidence.EvidenceReader, "read", "EvidenceReader.read (links + documents)")
    st.wrap(scorer.Scorer, "score", "Scorer.score (signals + rules + order)")
    st.wrap(impressions.ImpressionLog, "track", "ImpressionLog.track (impression)")
    st.wrap(evidence.EvidenceReader, "top_links", "EvidenceReader.top_links")
    st.wrap(explain, "ranking", "explain.ranking (Ranked objects)")
    st.wrap(explain, "_add_details", "  of which _add_details")
    st.wrap(results, "new_ranked", "  of which new_ranked")


def stage_feedback(rr: Reranker, pending: list, evict: Evictor) -> None:
    st = StageTimer()
    try:
        from heaprank.learning import feedback, learner
        from heaprank.model import links
    except ImportError:  # (an older checkout: the feedback call alone)
        pass
    else:
        st.wrap(feedback.FeedbackStage, "plan", "FeedbackStage.plan (verdicts, rows)")
        st.wrap(rr.state, "get_impression", "state.get_impression (decode)")
        st.wrap(rr.state, "read_links", "state.read_links (the EM credit's links)")
        st.wrap(feedback.FeedbackStage, "updates", "FeedbackStage.updates")
        st.wrap(links, "increments", "  of which links.increments")
        st.wrap(rr.state, "apply", "state.apply")
        st.wrap(learner.Learner, "learn", "Learner.learn")
    st.wrap(Reranker, "feedback", "feedback")
    try:
        for recall_id, used in pending:
            evict()
            rr.feedback(recall_id, used=used, now=T0)
    finally:
        st.restore()
    st.report("feedback", "feedback")


def load_checkout(root: str, name: str = "heaprank_against") -> object:
    """The ``heaprank`` package of another checkout, imported as module ``name`` (its imports
    are relative, so it loads beside this one)."""
    package = Path(root).resolve() / "heaprank"
    spec = importlib.util.spec_from_file_location(name, package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    if spec is None or spec.loader is None:
        raise SystemExit(f"--against: no heaprank package in {root}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _Converted:
    """A retriever whose candidates are another heaprank's ``Candidate`` objects."""

    def __init__(self, retriever: Retriever, candidate_class: type) -> None:
        self.retriever, self.cls = retriever, candidate_class

    def candidates(self, namespace: str, question: str, n: int) -> list:
        return [self.cls(c.id, c.text, c.score, c.metadata)
                for c in self.retriever.candidates(namespace, question, n)]


def side_by_side(args: argparse.Namespace) -> None:
    """This checkout and ``--against`` timed call by call on the same questions."""
    import heaprank

    other = load_checkout(args.against)
    evict = Evictor(args.cold)
    clock = time.thread_time_ns if args.cpu else time.perf_counter_ns
    workload = make_workload(args.seed, 16, 1500, 3000 + 8 * 64)
    retriever = Retriever(workload)
    warm, timed = workload.questions[:3000], workload.questions[3000:3064]
    systems = {}
    tmp = tempfile.mkdtemp(prefix="heaprank-profile-")
    for label, module in (("this", heaprank), ("against", other)):
        source = _Converted(retriever, module.Candidate)  # type: ignore[attr-defined]
        if args.backend == "memory":
            rr = module.Reranker()  # type: ignore[attr-defined]
            warm_heaprank(rr, source, warm, args.seed, NoProgress())
        else:  # warmed without fsyncs, then timed in the default durable mode
            path = f"{tmp}/{label}.db"
            with module.Reranker(module.SQLiteState(path, synchronous="OFF")) as fast:  # type: ignore[attr-defined]
                warm_heaprank(fast, source, warm, args.seed, NoProgress())
            rr = module.Reranker(f"sqlite:///{path}")  # type: ignore[attr-defined]
        systems[label] = (rr, source)
    gc.freeze()
    rows = []
    for n, reps in ((50, args.calls), (1000, max(args.calls // 10, 20))):
        calls = {}
        for label, (rr, source) in systems.items():
            cands = [(ns, q, source.candidates(ns, q, n)) for ns, q, _ in timed]
            calls[label] = evict.before(timing.rerank_call(rr, cands, K, True))
        samples = timing.interleave(calls, reps, 10, clock=clock)
        rows.append((f"rerank {n:,} + EXPLAIN", {k: timing.summarize(v) for k, v in samples.items()}))
    calls = {}
    for label, (rr, source) in systems.items():
        cands = [(ns, q, source.candidates(ns, q, 50)) for ns, q, _ in timed]
        feedback = timing.feedback_call(rr, cands, [t for _, _, t in timed], args.seed)
        calls[label] = feedback if evict.buffer is None else _cold_feedback(feedback, evict)
    samples = timing.interleave(calls, args.calls, 10, clock=clock)
    rows.append(("feedback (1 used + 9 ignored)", {k: timing.summarize(v) for k, v in samples.items()}))
    if args.group > 1:
        calls = {}
        for label, (rr, source) in systems.items():
            cands = [(ns, q, source.candidates(ns, q, 50)) for ns, q, _ in timed]
            calls[label] = _group_call(rr, cands, [t for _, _, t in timed], args.seed, args.group)
        samples = timing.interleave(calls, max(args.calls // args.group, 20), 2, clock=clock)
        rows.append((f"feedback_many of {args.group}, each",
                     {k: {"p50_ms": timing.summarize(v)["p50_ms"] / args.group}
                      for k, v in samples.items()}))
    print(f"this: {Path(heaprank.__file__).parent.parent}  against: {Path(args.against).resolve()}"
          f"  ({args.backend} backend, {'thread CPU' if args.cpu else 'wall'} time, us, p50 of "
          f"interleaved calls{f', caches evicted ({args.cold:g} MB read) before each' if args.cold else ''})")
    print(f"{'what':<30}  {'against':>9}  {'this':>9}  {'x faster':>8}")
    for what, by in rows:
        before, after = by["against"]["p50_ms"] * 1e3, by["this"]["p50_ms"] * 1e3
        print(f"{what:<30}  {before:>9.1f}  {after:>9.1f}  {before / after:>8.2f}")


def _group_call(rr: Any, cands: Sequence[tuple[str, str, list[Any]]], qtypes: Sequence[str],
                seed: int, group: int) -> Callable[[int], Callable[[], Any]]:
    """``group`` reranks (untimed), then their feedbacks in one ``feedback_many`` (timed)."""
    rng = random.Random(seed)

    def call(i: int) -> Callable[[], Any]:
        requests = []
        for j in range(i * group, (i + 1) * group):
            ns, q, candidates = cands[j % len(cands)]
            ranking = rr.rerank(q, candidates, namespace=ns, k=K, now=T0)
            requests.append((ranking.recall_id, pick_used(
                qtypes[j % len(qtypes)], [(r.id, r.candidate.text) for r in ranking], rng,
                always=True)))
        return lambda: rr.feedback_many(requests, now=T0)
    return call


def _cold_feedback(feedback: Callable[[int], Callable[[], Any]],
                   evict: Evictor) -> Callable[[int], Callable[[], Any]]:
    """A feedback call (its rerank untimed, then the timed feedback) with the caches evicted
    between the two."""
    def call(i: int) -> Callable[[], Any]:
        timed = feedback(i)
        evict()
        return timed
    return call


def shares(profile: cProfile.Profile, top: int, title: str) -> None:
    stats = pstats.Stats(profile)
    total = stats.total_tt
    rows = stats.stats  # type: ignore[attr-defined]
    print(f"\n== {title}: {total:.3f} s profiled")
    for key, label in (("tottime", "own time"), ("cumtime", "cumulative")):
        idx = 2 if key == "tottime" else 3
        print(f"-- by {label}")
        ranked = sorted(rows.items(), key=lambda kv: -kv[1][idx])[:top]
        for (path, line, func), values in ranked:
            where = f"{Path(path).parent.name}/{Path(path).name}:{line}" if line else path
            print(f"{100 * values[idx] / total:6.1f}%  {values[1]:>8} calls  {func}  ({where})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=50, help="candidates per rerank")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--backend", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", action="store_true",
                        help="wall-clock stage shares instead of cProfile")
    parser.add_argument("--against", metavar="DIR",
                        help="time another checkout side by side with this one instead")
    parser.add_argument("--cpu", action="store_true",
                        help="with --against: thread CPU time instead of wall time")
    parser.add_argument("--group", type=int, default=1, metavar="G",
                        help="with --against: also time feedback_many of G feedbacks")
    parser.add_argument("--cold", type=float, default=0.0, metavar="MB",
                        help="read MB megabytes before every timed call (cold CPU caches)")


def run(args: argparse.Namespace) -> int:
    if args.against:
        side_by_side(args)
        return 0
    profile_this(args)
    return 0


def profile_this(args: argparse.Namespace) -> None:
    """cProfile (or, with ``--stages``, the stage timer) over this checkout's reranks, then
    over its feedbacks."""
    workload = make_workload(args.seed, 16, 1500, 3000 + 200)
    retriever = Retriever(workload)
    with tempfile.TemporaryDirectory() as tmp:
        state = None if args.backend == "memory" else f"sqlite:///{tmp}/state.db"
        rr = Reranker(state, config=Config(refit=Refit(every=0)))  # as latency times it
        warm_heaprank(rr, retriever, workload.questions[:3000], args.seed, NoProgress())
        timed = workload.questions[3000:]
        cands = [(ns, q, t, retriever.candidates(ns, q, args.n)) for ns, q, t in timed]
        for ns, q, _, c in cands[:20]:  # warm caches outside the profile
            rr.rerank(q, c, namespace=ns, k=K, now=T0)
        # As the latency benchmark does: the store and the warm state out of the collector's
        # reach, so a collection during a call does not scan the harness's own objects.
        gc.freeze()
        evict = Evictor(args.cold)
        if args.stages:
            stage_rerank(rr, cands, args.calls, evict)
        else:
            profile = cProfile.Profile()
            profile.enable()
            for i in range(args.calls):
                ns, q, _, c = cands[i % len(cands)]
                for item in rr.rerank(q, c, namespace=ns, k=K, now=T0):
                    item.explain()
            profile.disable()
            shares(profile, args.top, f"rerank {args.n} candidates, k={K}, explain() on each")
        rng = random.Random(args.seed)
        if args.stages:  # every rerank first, then the feedbacks: their link means re-read
            pending = []
            for i in range(args.calls):
                ns, q, qtype, c = cands[i % len(cands)]
                ranking = rr.rerank(q, c, namespace=ns, k=K, now=T0)
                used = pick_used(qtype, [(r.id, r.candidate.text) for r in ranking], rng,
                                 always=True)
                pending.append((ranking.recall_id, used))
            stage_feedback(rr, pending, evict)
        else:  # as the latency benchmark: each feedback right after its (unprofiled) rerank
            profile = cProfile.Profile()
            for i in range(args.calls):
                ns, q, qtype, c = cands[i % len(cands)]
                ranking = rr.rerank(q, c, namespace=ns, k=K, now=T0)
                used = pick_used(qtype, [(r.id, r.candidate.text) for r in ranking], rng,
                                 always=True)
                profile.enable()
                rr.feedback(ranking.recall_id, used=used, now=T0)
                profile.disable()
            shares(profile, args.top, "feedback right after its rerank, 1 used + 9 ignored")
        rr.close()
