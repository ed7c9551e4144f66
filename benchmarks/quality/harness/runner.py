"""The heaprank side of the LoCoMo harness: feedback simulation, evaluation, weight grid.

Protocol (docs/design.md, "Evaluation"), per held-out conversation (a *fold*):

1. a fresh :class:`~heaprank.Reranker` with in-memory state;
2. every question of the other conversations, in one seeded order shared by all folds, is
   re-ranked with ``k=10`` shown (``now`` = that conversation's question time) and answered with
   feedback: *oracle* cites exactly the evidence turns among the shown; *noisy* gives feedback for
   half the questions, cites each shown evidence turn with probability 0.5 and, with probability
   0.1, one random shown non-evidence turn too; *positional* examines rank r with probability
   1/r and cites the evidence turns it examined; ``answer``, ``answer-restated`` and ``cites``
   are feedback as an app gives it (:mod:`.answers`): the gold answer attributed by heaprank's
   own attribution (an abstention gives no feedback), or a position-biased citing model;
3. every held-out question is re-ranked with ``k=50, track=False`` in its own namespace, which
   never received feedback, and scored on the full re-ranked candidate list.

The weight grid (row 4) is chosen on the training conversations only, each scored as a new user
through :class:`heaprank.learning.evaluation.LeaveNamespaceOut` (its own evidence and document stats
hidden, the pool minus its own contribution visible), so no held-out question ever influences a
choice.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from heaprank.config import SIGNALS, Config, Weights
from heaprank.learning.attribution import Shown
from heaprank.learning.evaluation import LeaveNamespaceOut
from heaprank.reranker import Reranker
from heaprank.scoring.candidates import Candidate
from heaprank.scoring.results import Ranking

from .answers import ANSWER_MODES, AttributionTally, simulated_used
from .data import CandidateList, Dataset, DenseScorer, question_time
from .metrics import Score, score_ranking

SHOWN_K = 10
EVAL_K = 50

#: Row 4's grid over the exponents (relevance and importance stay 1; importance is constant on
#: LoCoMo, every turn has the same kind). The brief's 4 x 3 grid, extended because scoring a grid
#: point costs no extra rerank: usefulness 0 lets the grid refuse learning, recency 0.25 sits
#: between off and half.
GRID_USEFULNESS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
GRID_RECENCY = (0.0, 0.25, 0.5, 1.0)


def grid_points() -> list[dict[str, float]]:
    """Grid points, the ones nearest the defaults first (ties in training MRR go to them)."""
    points = [{"relevance": 1.0, "recency": r, "importance": 1.0, "usefulness": u,
               "reinforcement": 0.0} for u, r in itertools.product(GRID_USEFULNESS, GRID_RECENCY)]
    return sorted(points, key=lambda w: (abs(math.log2(w["usefulness"] + 0.25) - math.log2(1.25))
                                         + abs(w["recency"] - 1.0), w["usefulness"], w["recency"]))


@dataclass(slots=True)
class Prepared:
    """Everything a run needs about the data, built once: candidates as :class:`Candidate`."""

    data: Dataset
    lists: list[CandidateList]
    namespaces: list[str]
    times: list[float]  # question time per conversation (the run's offset)
    candidates: list[list[Candidate]]  # per question, ids = dia_id
    evidence: list[frozenset[str]]  # per question, evidence ids
    unique_candidates: list[list[Candidate]] | None = None  # ids "sample_id/dia_id"
    unique_evidence: list[frozenset[str]] | None = None

    def cands(self, qi: int, unique: bool = False) -> list[Candidate]:
        return (self.unique_candidates if unique else self.candidates)[qi]  # type: ignore[index]

    def ev(self, qi: int, unique: bool = False) -> frozenset[str]:
        return (self.unique_evidence if unique else self.evidence)[qi]  # type: ignore[index]

    def retriever_score(self, qi: int, unique: bool = False) -> Score:
        """Question ``qi`` scored on its candidates in the order they were handed in."""
        return score_ranking([c.id for c in self.cands(qi, unique)], self.ev(qi, unique))


def _candidates(data: Dataset, lists: list[CandidateList], unique: bool,
                dense: DenseScorer | None = None
                ) -> tuple[list[list[Candidate]], list[frozenset[str]]]:
    """Each question's candidates; with ``dense``, each also carries its dense cosine in
    ``metadata.retriever_scores`` (heaprank's fusion reads it when ``fusion_weights`` names
    ``dense``)."""
    built: dict[tuple[int, int], tuple[str, dict[str, object]]] = {}
    out: list[list[Candidate]] = []
    evidence: list[frozenset[str]] = []
    for q, cl in zip(data.questions, lists):
        conv = data.conversations[q.conv]
        prefix = f"{conv.sample_id}/" if unique else ""
        row = []
        cosine = dense.scores(q).tolist() if dense is not None else None
        for t, s in zip(cl.turns.tolist(), cl.scores.tolist()):
            key = (q.conv, t)
            if key not in built:
                turn = conv.turns[t]
                meta = {"created_at": turn.created_at, "source": turn.speaker,
                        "thread": str(turn.session), "position": turn.position}
                built[key] = (prefix + turn.id, meta)
            doc_id, meta = built[key]
            if cosine is not None:
                meta = {**meta, "retriever_scores": {"dense": cosine[t]}}
            row.append(Candidate(id=doc_id, text=conv.turns[t].text, score=float(s),
                                 metadata=meta))
        out.append(row)
        evidence.append(frozenset(prefix + conv.turns[t].id for t in q.evidence))
    return out, evidence


def prepare(data: Dataset, lists: list[CandidateList], offset_days: float,
            unique_ids: bool = False, dense: DenseScorer | None = None) -> Prepared:
    cands, ev = _candidates(data, lists, unique=False, dense=dense)
    prep = Prepared(data=data, lists=lists,
                    namespaces=[c.sample_id for c in data.conversations],
                    times=[question_time(c, offset_days) for c in data.conversations],
                    candidates=cands, evidence=ev)
    if unique_ids:
        prep.unique_candidates, prep.unique_evidence = _candidates(data, lists, unique=True,
                                                                   dense=dense)
    return prep


def training_order(data: Dataset, seed: int) -> list[int]:
    """One seeded order of every question; each fold skips its held-out conversation's."""
    rng = np.random.default_rng([seed, 0x7EA1])
    return rng.permutation(len(data.questions)).tolist()


def feedback_rng(seed: int, fold: int, qi: int) -> np.random.Generator:
    """The noise of one (fold, question): the same draws for heaprank and heapdb-memory."""
    return np.random.default_rng([seed, fold, qi, 0x5EED])


def gives_feedback(rng: np.random.Generator) -> bool:
    """Noisy mode: half the questions give any feedback (the first draw of the stream)."""
    return bool(rng.random() < 0.5)


def noisy_used(rng: np.random.Generator, shown: Sequence[str],
               evidence: frozenset[str]) -> list[str]:
    """Each shown evidence item cited with p 0.5; with p 0.1 one random shown non-evidence
    item cited too."""
    used = [d for d in shown if d in evidence and rng.random() < 0.5]
    if rng.random() < 0.1:
        others = [d for d in shown if d not in evidence]
        if others:
            used.append(others[int(rng.integers(len(others)))])
    return used


def examination_truth(k: int = SHOWN_K) -> list[float]:
    """Positional mode: the probability that the simulated reader examines rank 1..k
    (``1 / r``)."""
    return [1.0 / r for r in range(1, k + 1)]


@dataclass(frozen=True)
class Positional:
    """Positional mode's draws for one (fold, question): the reader examines rank ``r`` when
    its ``r``-th uniform draw is below :func:`examination_truth`'s ``1 / r`` (the same draws
    whatever was shown, so two rerankers' feedback is paired), and cites the evidence among
    the items it examined."""

    draws: np.ndarray

    def used(self, shown: Sequence[str], evidence: frozenset[str]) -> list[str]:
        truth = examination_truth(len(shown))
        return [d for r, d in enumerate(shown) if d in evidence and self.draws[r] < truth[r]]


def feedback_noise(mode: str, seed: int, stream: int, qi: int
                   ) -> tuple[bool, np.random.Generator | Positional | None]:
    """``(answers, rng)`` of question ``qi`` in noise stream ``stream`` (a fold): whether it
    gives feedback at all, and the draws its citations take (None: oracle, exact)."""
    if mode == "oracle":
        return True, None
    if mode == "positional":
        return True, Positional(feedback_rng(seed, stream, qi).random(SHOWN_K))
    if mode != "noisy":
        raise ValueError(f"unknown feedback mode {mode!r}")
    rng = feedback_rng(seed, stream, qi)
    return gives_feedback(rng), rng


def cited(rng: np.random.Generator | Positional | None, shown: Sequence[str],
          evidence: frozenset[str]) -> list[str]:
    """The ids an answer cites among ``shown``: the evidence (oracle, ``rng`` None), the
    evidence the reader examined (positional), else :func:`noisy_used`."""
    if rng is None:
        return [d for d in shown if d in evidence]
    if isinstance(rng, Positional):
        return rng.used(shown, evidence)
    return noisy_used(rng, shown, evidence)


Tick = Callable[[int], object]


class HeaprankRunner:
    """Train (simulate feedback) and evaluate heaprank on a :class:`Prepared` benchmark."""

    def __init__(self, prep: Prepared, *, seed: int, tick: Tick | None = None,
                 train_conversations: frozenset[int] | None = None) -> None:
        self.prep = prep
        self.seed = seed
        # Only these conversations give feedback (all by default): choices made on the dev
        # split can then be made without any test conversation's labels.
        self.order_all = training_order(prep.data, seed)
        self.order = [qi for qi in self.order_all
                      if train_conversations is None
                      or prep.data.questions[qi].conv in train_conversations]
        self.tick = tick or (lambda n: None)
        self.stats: dict[str, float] = {"reranks": 0, "rerank_s": 0.0, "feedbacks": 0,
                                        "feedback_s": 0.0}
        self.feedback_log: dict[str, dict[str, int]] = {}
        self.attribution_log: dict[str, dict[str, float | int]] = {}

    def _rerank(self, rr: Reranker, *args: object, **kwargs: object) -> Ranking:
        t0 = time.perf_counter()
        ranking = rr.rerank(*args, **kwargs)  # type: ignore[arg-type]
        self.stats["rerank_s"] += time.perf_counter() - t0
        self.stats["reranks"] += 1
        return ranking

    # ------------------------------------------------------------------ training

    def train(self, fold: int, config: Config, mode: str, *, unique: bool = False,
              label: str | None = None, curve: Sequence[float] | None = None) -> Reranker:
        """A fresh reranker that learned from every conversation but ``fold``; what the feedback
        looked like is tallied in ``feedback_log[label or mode]`` (with the attribution's
        precision and recall in ``attribution_log`` for the modes of :mod:`.answers`). ``curve``:
        with ``learning.reject_discount="fitted"``, reject weights by rank to hold from the start (a
        reference: the true examination curve, as if the fit had found it)."""
        rr = Reranker(config=config)
        if curve is not None:
            rr._feedback.examine(curve)  # (the stage's own entry point for a fitted curve)
        if mode == "none":
            return rr
        prep = self.prep
        log = self.feedback_log.setdefault(label or mode, {
            "feedbacks": 0, "with_citation": 0, "citations": 0, "false_citations": 0,
            "evidence_shown": 0})
        tally = AttributionTally() if mode in ANSWER_MODES else None
        for qi in self.order:
            q = prep.data.questions[qi]
            if q.conv == fold:
                continue
            self.tick(1)
            cands = prep.cands(qi, unique)
            if not cands:
                continue
            ev = prep.ev(qi, unique)
            answers, rng = (True, feedback_rng(self.seed, fold, qi)) if tally is not None \
                else feedback_noise(mode, self.seed, fold, qi)
            if not answers:
                continue
            ranking = self._rerank(rr, q.text, cands, namespace=prep.namespaces[q.conv],
                                   k=SHOWN_K, now=prep.times[q.conv])
            shown = ranking.ids
            if tally is None:
                used: list[str] | None = cited(rng, shown, ev)
            else:
                used = self._simulated(mode, qi, cands, shown, ev, rng)
                tally.add(used, shown, ev)
            if used is None:
                continue  # the attribution abstained: no feedback, as an app would do
            t0 = time.perf_counter()
            rr.feedback(ranking.recall_id, used=used)
            self.stats["feedback_s"] += time.perf_counter() - t0
            self.stats["feedbacks"] += 1
            log["feedbacks"] += 1
            log["with_citation"] += bool(used)
            log["citations"] += len(used)
            log["false_citations"] += sum(d not in ev for d in used)
            log["evidence_shown"] += any(d in ev for d in shown)
        if tally is not None:
            AttributionTally.into(self.attribution_log, label or mode, tally)
        return rr

    def _simulated(self, mode: str, qi: int, cands: Sequence[Candidate], shown: Sequence[str],
                   ev: frozenset[str], rng: np.random.Generator) -> list[str] | None:
        """"Used" of one simulated answer (:func:`.answers.simulated_used`)."""
        q = self.prep.data.questions[qi]
        text = {c.id: c.text or "" for c in cands}
        return simulated_used(mode, gold=q.answer, question=q.text,
                              shown=[Shown(d, (), text[d]) for d in shown], evidence=ev, rng=rng)

    # ---------------------------------------------------------------- evaluation

    def evaluate(self, rr: Reranker, questions: Sequence[int], *, config: Config | None = None,
                 offset_days: float | None = None, unique: bool = False) -> list[Score]:
        """Score every question in ``questions`` on the full re-ranked candidate list."""
        prep = self.prep
        out: list[Score] = []
        for qi in questions:
            q = prep.data.questions[qi]
            cands = prep.cands(qi, unique)
            ev = prep.ev(qi, unique)
            self.tick(1)
            if not cands:
                out.append(score_ranking((), ev))
                continue
            conv = prep.data.conversations[q.conv]
            now = prep.times[q.conv] if offset_days is None else question_time(conv, offset_days)
            ranking = self._rerank(rr, q.text, cands, namespace=prep.namespaces[q.conv],
                                   k=EVAL_K, now=now, track=False, config=config)
            out.append(score_ranking(ranking.order_ids, ev))
        return out

    # ------------------------------------------------------------------ the grid

    def signal_tables(self, rr: Reranker, questions: Sequence[int]
                      ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
        """Per question ``(input positions, log signals, is_evidence)`` in ranked order, from
        one rerank with all weights 1 (``rr``'s config otherwise); ``None`` without candidates."""
        prep = self.prep
        # The defaults need not be all 1. Association keeps its weight: its factor hangs on the
        # base score, so the grid (over the other exponents) takes its term as it is.
        ones = Weights(**{name: 1.0 for name in SIGNALS if name != "association"},
                       association=rr.config.weights.association)
        if rr.config.weights != ones or rr.config.qtype_weights:
            rr = rr.with_config(weights=ones, qtype_weights={})
        out: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = []
        for qi in questions:
            q = prep.data.questions[qi]
            cands = prep.cands(qi)
            self.tick(1)
            if not cands:
                out.append(None)
                continue
            ranking = self._rerank(rr, q.text, cands, namespace=prep.namespaces[q.conv],
                                   k=EVAL_K, now=prep.times[q.conv], track=False)
            position = {c.id: i for i, c in enumerate(cands)}
            pos = np.array([position[d] for d in ranking.order_ids], dtype=np.int64)
            logs = np.asarray(ranking.log_terms, dtype=np.float64)
            ev = prep.ev(qi)
            is_ev = np.array([d in ev for d in ranking.order_ids], dtype=bool)
            out.append((pos, logs, is_ev))
        return out

    @staticmethod
    def grid_rr(tables: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray] | None],
                weights: Sequence[dict[str, float]]) -> np.ndarray:
        """``(n_questions, n_points)`` reciprocal ranks of the first evidence item.

        Recomputes heaprank's order exactly: ``sum_i w_i log s_i`` (a weight-0 term is 0), ties
        by relevance then input position (the tests check it against real reranks).
        """
        W = np.array([[w.get(s, 1.0) for s in SIGNALS] for w in weights], dtype=np.float64)
        rel = SIGNALS.index("relevance")
        out = np.zeros((len(tables), len(weights)))
        for i, table in enumerate(tables):
            if table is None:
                continue
            pos, logs, is_ev = table
            if not is_ev.any():
                continue
            terms = np.where(W[:, None, :] == 0, 0.0, W[:, None, :] * logs[None, :, :])
            score = terms.sum(axis=2)
            n_pts, n = score.shape
            keys = np.stack([np.broadcast_to(pos, (n_pts, n)),
                             np.broadcast_to(-logs[:, rel], (n_pts, n)), -score])
            order = np.lexsort(keys, axis=-1)
            hits = is_ev[order]
            first = hits.argmax(axis=1)
            out[i] = 1.0 / (first + 1.0)
        return out

    def grid(self, rr: Reranker, train_questions: Sequence[int]
             ) -> tuple[list[dict[str, float]], np.ndarray]:
        """The grid points and the ``(n_questions, n_points)`` reciprocal ranks of the training
        questions, each conversation seen as a new user through :class:`LeaveNamespaceOut`."""
        view = rr.with_state(LeaveNamespaceOut(rr.state))
        tables = self.signal_tables(view, train_questions)
        points = grid_points()
        rrs = self.grid_rr(tables, points)
        # Self-check: at the base weights the recomputed order must be heaprank's own.
        base = {s: 1.0 for s in SIGNALS}
        own = np.array([0.0 if t is None or not t[2].any() else 1.0 / (t[2].argmax() + 1.0)
                        for t in tables])
        if not np.array_equal(self.grid_rr(tables, [base])[:, 0], own):
            raise RuntimeError("grid recomputation disagrees with Reranker.rerank's order; "
                               "update HeaprankRunner.grid_rr to the core's scoring")
        return points, rrs

    def choose_weights(self, rr: Reranker, fold: int, train_questions: Sequence[int]
                       ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """The grid point with the best MRR on the training conversations, each seen as a new
        user through :class:`LeaveNamespaceOut`; returns it and the whole grid's scores."""
        points, rrs = self.grid(rr, train_questions)
        mrr = rrs.mean(axis=0)
        best = int(np.argmax(np.round(mrr, 12)))
        table = [{"weights": p, "train_mrr": float(m)} for p, m in zip(points, mrr)]
        return points[best], table


def eval_questions(data: Dataset, folds: Sequence[int]) -> list[int]:
    chosen = set(folds)
    return [q.index for q in data.questions if q.conv in chosen]


def top_links(rr: Reranker, n: int = 10, min_n: float = 20.0) -> list[dict[str, float | str]]:
    """The ``n`` strongest pooled links with at least ``min_n`` observations."""
    return [{"feature": link.feature, "p": round(link.p, 5), "n": round(link.n, 1),
             "low": round(link.low, 5), "high": round(link.high, 5)}
            for link in rr.links("*", min_n=min_n)[:n]]
