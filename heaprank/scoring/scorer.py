"""One rerank's scoring, in pipeline order: what the inputs say (:meth:`Scorer.see`: the
candidates checked, the question read, the retriever's relevance, each candidate's feature row),
then, with what the state said of them, the signals, the rules, co-use spreading and the order
best first (:meth:`Scorer.score`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..config import SIGNALS, Config
from ..model import links as linkmath
from ..model.evidence import Evidence
from ..model.exploration import Explorer
from ..model.features import (
    NEIGHBOUR_CODE,
    NO_STRUCTURE,
    neighbour_slots,
    stage_codes,
)
from ..model.questions import QueryInfo, QuestionClassifier
from ..model.signals import SIGNALS as SIGNAL_DECLARED
from . import fusion, rank
from . import signals as sig
from .candidates import CandidateBatch, CandidateLike, coerce_candidates
from .generation import Generation
from .rules import Rule, apply_rules
from .space import FeatureRows, FeatureSpace
from .spreading import Association, associate


class Request(NamedTuple):
    """One rerank as asked for, its arguments checked; ``explicit``: the caller chose ``now``."""

    query: str
    namespace: str
    k: int
    when: float
    explicit: bool
    track: bool
    config: Config


class Seen(NamedTuple):
    """What a rerank reads from its inputs alone: the candidates, the question, the retriever's
    relevance (``fused``: the other retriever scores blended into it, or None), and each
    candidate's feature row (``rows``: the distinct rows; ``row_of``: each candidate's among
    them; ``generation``: the feature space's generation they index, kept whole for this
    rerank whatever reset comes after)."""

    batch: CandidateBatch
    info: QueryInfo
    relevance: np.ndarray
    fused: np.ndarray | None
    rows: np.ndarray
    row_of: np.ndarray
    generation: Generation

    @property
    def feature_rows(self) -> FeatureRows:
        """The rows as the feature space returned them."""
        return FeatureRows(self.rows, self.row_of, self.generation)


class Signals(NamedTuple):
    """The signal values of one rerank: ``age`` in seconds since last use (creation until the
    first), the mean usefulness ``use`` and the one ranked on (a Thompson sample's when the
    rerank explored: ``sampled`` holds the sampled link means)."""

    age: np.ndarray
    importance: np.ndarray
    usage: sig.UsageSignals
    use: np.ndarray
    sampled: np.ndarray | None
    ranked_use: np.ndarray


class Scored(NamedTuple):
    """A scored rerank: its signals and their matrix (:data:`~heaprank.config.SIGNALS` order),
    the weights, the rule multipliers and the rules that fired (by candidate), the log score
    with its terms, the association factors (None: spreading off), the mask of candidates no
    rule dropped (None: no rule fired), and the order best first (``top``: its first ``k``;
    ``top_rows``: their feature rows)."""

    request: Request
    seen: Seen
    evidence: Evidence
    signals: Signals
    matrix: np.ndarray
    weights: rank.WeightRow
    rules: np.ndarray
    fired: dict[int, list[tuple[str, float]]]
    log_score: np.ndarray
    log_terms: np.ndarray
    log_rules: np.ndarray
    linked: Association | None
    kept: np.ndarray | None
    order: np.ndarray
    top: np.ndarray
    top_rows: list[int]


class Scorer:
    """The scoring stages of a reranker: its feature space, question classifier, rules and
    exploration draws."""

    def __init__(self, space: FeatureSpace, classify: QuestionClassifier,
                 rules: tuple[Rule, ...], explorer: Explorer) -> None:
        self.space = space
        self.classify = classify
        self.rules = rules
        self.explorer = explorer

    def see(self, candidates: Sequence[CandidateLike], request: Request) -> Seen:
        """Check and convert the candidates, then :meth:`read` them."""
        cfg = request.config
        batch = coerce_candidates(candidates, now=request.when, on_invalid=cfg.inputs.on_invalid,
                                  future_tolerance_s=cfg.inputs.future_tolerance_s)
        return self.read(batch, request.query, cfg)

    def read(self, batch: CandidateBatch, query: str, cfg: Config) -> Seen:
        """What ``query`` and the candidates say before the state is read."""
        info = self.space.query(query, self.classify)
        rel, fused = relevance(batch, info, cfg)
        got = self._feature_rows(info, batch, cfg, rel, fused is not None)
        return Seen(batch, info, rel, fused, got.distinct, got.of, got.generation)

    def _feature_rows(self, query: QueryInfo, batch: CandidateBatch, cfg: Config,
                      rel: np.ndarray, fused: bool) -> FeatureRows:
        """The distinct feature rows of the candidates and each candidate's position among them
        (see :meth:`FeatureSpace.feature_rows`). The neighbour and first-stage slots rank the
        candidates by the retriever's score, or by the ``fused`` relevance when several scores
        were blended."""
        threads = batch.threads.count(None) != len(batch)
        structure: list[int] | None = None
        if threads or cfg.features.stage_slots:
            if fused:
                scores = rel
            else:
                scores = batch.scores if cfg.scoring.score_kind == "similarity" else -batch.scores
            # best first, ties by input position (a stable sort)
            order = np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")
            if threads:  # else nobody has a neighbour
                retriever_rank = np.empty(len(batch), dtype=np.intp)
                retriever_rank[order] = np.arange(len(batch))
                codes = np.fromiter(map(NEIGHBOUR_CODE.__getitem__, neighbour_slots(
                    batch.threads, batch.position.tolist(), retriever_rank.tolist())),
                    dtype=np.intp, count=len(batch))
                if cfg.features.stage_slots:
                    codes += stage_codes(order, rel)
            else:
                codes = stage_codes(order, rel) + NO_STRUCTURE
            structure = codes.tolist()
        return self.space.feature_rows(query, batch, structure=structure,
                                       tag_slots=cfg.features.tag_slots,
                                       doc_features=cfg.features.doc_features,
                                       speaker_roles=cfg.features.speaker_roles,
                                       answer_slots=cfg.features.answer_slots)

    def score(self, request: Request, seen: Seen, evidence: Evidence) -> Scored:
        """The signals, rules and order of a rerank, from what it saw and what the state said."""
        cfg = request.config
        signals = self._signals(request, seen, evidence)
        values = _columns(request, seen, signals)
        matrix = rank.matrix(len(seen.batch), values)
        weights = rank.weight_row(cfg.weights_for(seen.info.qtype),
                                  cfg.scoring.intent_recency.get(seen.info.intent))
        mult, fired = apply_rules(seen.batch, self.rules, cfg.scoring.superseded_multiplier, request.when,
                                  forgotten=signals.usage.forgotten)
        log_score, log_terms, log_rules = rank.combine(
            matrix, weights.array, mult, no_rule_fired=not fired,
            off=rank.zero_mask(weights, values))
        linked = None
        co_use = cfg.learning.co_use if cfg.weights.association > 0 else None
        if co_use is not None:  # spreads from the base score: every other signal and the rules
            linked = associate(log_score, evidence.edges, request.when, co_use)
            matrix[:, SIGNALS.index("association")] = linked.factor
            log_score, log_terms, log_rules = rank.combine(
                matrix, weights.array, mult, no_rule_fired=not fired, off=weights.off)
        # Every signal is positive and finite: only a rule that fired can drop a candidate
        kept = np.isfinite(log_score) if fired else None
        # Best first; ties keep the retriever's order (relevance, then input position: the
        # sort is stable).
        order = rank.best_first(log_score, seen.relevance)
        if kept is not None and not kept.all():
            order = order[kept[order]]
        top = order[:request.k]
        (top_rows,) = rank.take(top, (seen.row_of,))
        return Scored(request, seen, evidence, signals, matrix, weights, mult, fired, log_score,
                      log_terms, log_rules, linked, kept, order, top, top_rows)

    def _signals(self, request: Request, seen: Seen, evidence: Evidence) -> Signals:
        cfg, batch, links, docs = request.config, seen.batch, evidence.links, evidence.docs
        use = links.usefulness[seen.row_of]
        # fmax(x, NaN) is x: a last_used no candidate gave is skipped, bit for bit
        last = docs.last_used if batch.absent("last_used") else np.fmax(docs.last_used,
                                                                         batch.last_used)
        # a stored time after now counts as now (NaN, an unknown time, stays NaN)
        age = request.when - np.minimum(np.fmax(last, batch.created_at), request.when)
        imp = sig.importance(batch, cfg.scoring.kind_importance)
        usage = sig.usage_signals(cfg, request.namespace, age, imp, docs.use_count)
        sampled = self.explorer.sample(cfg.exploration.rate, links.alpha, links.beta)
        ranked_use = use if sampled is None else linkmath.noisy_or(
            sampled[links.where])[seen.row_of]
        return Signals(age, imp, usage, use, sampled, ranked_use)


class SignalInputs(NamedTuple):
    """What a declared signal's column reads (:class:`heaprank.model.signals.Inputs`)."""

    batch: CandidateBatch
    seen: Seen
    signals: Signals
    request: Request


def _columns(request: Request, seen: Seen, signals: Signals) -> tuple[np.ndarray | float, ...]:
    """Each declared signal's column, in :data:`~heaprank.model.signals.SIGNALS` order (a
    float: the same for every candidate); association is 1 until spreading sets it."""
    inputs = SignalInputs(seen.batch, seen, signals, request)
    return tuple(signal.column(inputs) for signal in SIGNAL_DECLARED)


def relevance(batch: CandidateBatch, info: QueryInfo,
              cfg: Config) -> tuple[np.ndarray, np.ndarray | None]:
    """Relevance, and the other retriever scores blended into it (``None`` without
    ``fusion_weights``). A query with no content words ranks by the other signals."""
    rel = sig.relevance(batch.scores, kind=cfg.scoring.score_kind, floor=cfg.scoring.relevance_floor,
                        rank_tau=cfg.scoring.rank_tau)
    if not info.has_content:
        return np.ones_like(rel), None
    if not cfg.scoring.fusion_weights:
        return rel, None
    extra = fusion.retriever_scores(batch, tuple(cfg.scoring.fusion_weights))
    return fusion.fuse(rel, extra, tuple(cfg.scoring.fusion_weights.values()),
                       cfg.scoring.relevance_floor), extra
