"""The :class:`Reranker`: score candidates from any retriever, learn from what was used."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ._checks import MAX_NAMESPACE_CHARS, check_id, check_ids, check_namespace, check_query
from ._flow import Call, Flow, adrive, drive
from ._time import DAY_S, resolve_now, to_epoch
from .config import SIGNALS, Config
from .errors import (
    ConfigError,
    FeedbackError,
    InputError,
    InputTypeError,
    StateError,
    StateUnavailableError,
)
from .learning import co_use as assoc
from .learning import links as linkmath
from .learning import retention as ret
from .records import (
    DocStats,
    FeedbackBatch,
    FeedbackOutcome,
    Impression,
    LinkCounts,
    UsedFeedback,
    new_feedback_item,
    new_recall_id,
)
from .scoring import fusion, rank, spreading
from .scoring import signals as sig
from .scoring.candidates import Candidate, CandidateBatch, CandidateLike, coerce_candidates
from .scoring.features import neighbour_slots
from .scoring.query import QueryInfo, QuestionClassifier, english_question_type
from .scoring.results import (
    Ranked,
    Ranking,
    ResultSource,
    exp_score,
    explain_template,
    new_ranked_many,
    new_ranking,
)
from .scoring.rules import Rule, apply_rules
from .scoring.space import FeatureSpace
from .state import MemoryState, StateBackend, open_state
from .state.capabilities import AsyncEdgeBackend, AsyncStateBackend, EdgeBackend
from .state.edges import EdgeRows

if TYPE_CHECKING:
    from .learning.tuning import TuneResult

TOP_LINKS = 3

logger = logging.getLogger("heaprank")


def _no_state(n_features: int, n_docs: int) -> tuple[LinkCounts, DocStats]:
    """What a rerank reads when the state cannot be reached: no evidence, no use."""
    zero = np.zeros(n_features)
    return (LinkCounts(zero, zero, zero, zero),
            DocStats(np.full(n_docs, math.nan), np.zeros(n_docs)))


@dataclass(frozen=True, slots=True)
class Link:
    """One learned link: P(useful | feature) with its evidence and a 90% interval."""

    feature: str
    p: float
    n: float
    low: float
    high: float
    pos: float
    neg: float


#: Config fields that shape what feedback learns; a per-call config may not change them (the
#: feedback for that recall would otherwise learn under other settings than the ranking used).
LEARNING_FIELDS = ("prior", "em_credit", "reject_discount", "doc_features", "tag_slots", "co_use",
                   "speaker_roles")
#: Distinct-row sets whose links a reranker keeps between feedbacks (see Reranker._row_links).
ROW_CACHE_ENTRIES = 1_024
#: Recent recalls whose shown items' link means a reranker keeps for their feedback (see
#: FeedbackBatch.means).
MEANS_ENTRIES = 1_024
#: How long a reranker keeps an impression it stored for that recall's feedback, in seconds
#: (feedback mostly follows its answer within seconds; later ones read it from the state).
KEPT_IMPRESSION_S = 600.0
#: What an impression stores per shown item, for tuning and replay.
IMPRESSION_SIGNALS = ("relevance", "age_days", "importance", "usefulness", "rules")

#: The log position discount of an ignored item, ``1 / log2(1 + rank)``, for the usual ranks.
_LOG_DISCOUNT = [math.inf] + [1.0 / math.log2(1.0 + rank) for rank in range(1, 257)]
_NO_DISCOUNT = [1.0] * len(_LOG_DISCOUNT)


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise InputTypeError(f"k: expected int, got {type(k).__name__}")
    if k < 1:
        raise InputError(f"k: must be >= 1, got {k}")
    return int(k)


def _associate(base_log: np.ndarray, rows: EdgeRows | None, now: float,
               co_use: assoc.CoUse) -> spreading.Association:
    """The association factor of each candidate from the edges read among them (``None``: the
    state could not be read)."""
    n = base_log.shape[0]
    strength, count = np.zeros((n, n)), np.zeros((n, n))
    if rows is not None and len(rows):
        now_s = assoc.decayed_array(rows.strength, rows.count, rows.last, now, co_use)
        live = now_s >= co_use.floor  # a pruned edge is gone even before it is deleted
        i, j = rows.i[live], rows.j[live]
        strength[i, j] = strength[j, i] = now_s[live]
        count[i, j] = count[j, i] = rows.count[live]
    return spreading.spread(base_log, strength, count, co_use)


def _co_used_with(batch: CandidateBatch, linked: spreading.Association, i: int) -> str:
    """EXPLAIN's note on an association factor: the seed it came from most."""
    partner = int(linked.partner[i])
    if linked.hops[i] == 1:
        return f"co-used with {batch.ids[partner]} x{linked.count[i]:g}"
    return f"co-used via {batch.ids[partner]}, {int(linked.hops[i])} hops"


class _RowLinks(NamedTuple):
    """What a rerank derives from the links of its distinct feature rows (one row per row)."""

    matrix: np.ndarray  # feature ids
    where: np.ndarray  # each entry's position in alpha and beta
    alpha: np.ndarray  # posterior of each distinct feature
    beta: np.ndarray
    p: np.ndarray  # posterior mean of each entry
    usefulness: np.ndarray  # noisy-OR of each row
    top_links: dict[int, tuple[tuple[str, float], ...]]  # a row's strongest links, once worked out
    link_texts: dict[int, str]  # a row's top links as EXPLAIN shows them, once composed


def _remember(cache: dict[str, Any], key: str, value: Any) -> None:
    """Keep ``value`` under ``key`` in a per-recall cache of at most :data:`MEANS_ENTRIES`
    entries, the oldest dropped first (threads may share the reranker: another one may empty or
    change the cache between the two steps of the drop, which then drops nothing)."""
    if len(cache) >= MEANS_ENTRIES:
        try:
            cache.pop(next(iter(cache)), None)
        except (StopIteration, RuntimeError):
            pass
    cache[key] = value


class Reranker:
    """Re-rank candidates by relevance x recency x importance x learned usefulness x rules.

    Args:
        state: Where learned links live: a URL (``memory://``, ``sqlite:///path.db``) or a
            :class:`~heaprank.StateBackend`; ``None`` keeps them in memory.
        config: Weights and signal settings (:class:`~heaprank.Config`).
        rules: Extra named multipliers (:class:`~heaprank.Rule`).
        question_classifier: Maps a query to a question type (English rules by default).
        feature_cache_bytes: Bound of the per-process cache of candidate shapes (it holds no
            caller text, only what featurisation read from it).
        strict: Raise :class:`~heaprank.StateUnavailableError` from ``rerank`` when the state
            cannot be reached, instead of ranking on the retriever and the priors (flagged in
            EXPLAIN, logged as a warning).

    Example:
        >>> rr = Reranker()
        >>> ranking = rr.rerank("When is my flight?", candidates, namespace="user:maya", k=3)
        >>> rr.feedback(ranking.recall_id, used=[ranking[0].id])
    """

    def __init__(self, state: str | StateBackend | None = None, *, config: Config | None = None,
                 rules: Sequence[Rule] = (),
                 question_classifier: QuestionClassifier = english_question_type,
                 feature_cache_bytes: int = 64 * 2**20, strict: bool = False) -> None:
        self.config = config if config is not None else Config()
        if not isinstance(self.config, Config):
            raise InputTypeError(f"config: expected Config, got {type(self.config).__name__}")
        self.rules = tuple(rules)
        for rule in self.rules:
            if not isinstance(rule, Rule):
                raise InputTypeError(f"rules: expected Rule objects, got {type(rule).__name__}")
        if not callable(question_classifier):
            raise InputTypeError("question_classifier: expected a callable")
        self.classify = question_classifier
        self.strict = bool(strict)
        self._space = FeatureSpace(max_bytes=feature_cache_bytes,
                                   prefix_chars=self.config.feature_prefix_chars)
        self.state: StateBackend = open_state(state)
        # (namespace, feature-space generation, distinct rows) -> (state version, links): see
        # _row_links
        self._row_cache: dict[tuple[str, int, bytes], tuple[object, _RowLinks]] = {}
        # recall id -> (state version, the rerank's row means, each shown item's row): see
        # _batch
        self._means: dict[str, tuple[object, np.ndarray, list[int]]] = {}
        # recall id -> (monotonic time, the impression this reranker stored for it), the last
        # MEANS_ENTRIES of the last KEPT_IMPRESSION_S: its feedback builds the batch from it
        # rather than reading it back (see _impression). Not for the memory state, which holds
        # its impressions in this process already.
        self._stored: dict[str, tuple[float, Impression]] = {}
        self._keep_impressions = not isinstance(self.state, MemoryState)
        if self.config.recency_kernel == "ebbinghaus" or self.config.drop_forgotten:
            ret.resolve_policy(self.config.retention_policy)  # a bad policy file fails here
        self._explore_rng = np.random.default_rng(self.config.exploration_seed)
        self._explore_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Reranker(state={self.state!r})"

    # ---------------------------------------------------------------- scoring

    def _feature_rows(self, query: QueryInfo, batch: CandidateBatch, cfg: Config,
                      fused: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The distinct feature rows of the candidates and each candidate's position among them
        (see :meth:`FeatureSpace.rows`). The neighbour slots rank the candidates by the
        retriever's score, or by the ``fused`` relevance when several scores were blended."""
        structure: list[tuple[str, ...]] | None
        if batch.threads.count(None) != len(batch):
            if fused is not None:
                scores = fused
            else:
                scores = batch.scores if cfg.score_kind == "similarity" else -batch.scores
            order = np.lexsort((np.arange(len(batch)), -np.nan_to_num(scores, nan=-np.inf)))
            retriever_rank = np.empty(len(batch), dtype=np.intp)
            retriever_rank[order] = np.arange(len(batch))
            structure = neighbour_slots(batch.threads, batch.position.tolist(),
                                        retriever_rank.tolist())
        else:  # no thread anywhere: nobody has a neighbour
            structure = None
        return self._space.rows(query, batch.ids, batch.texts, batch.kinds, batch.sources,
                                batch.tags, cfg.tag_slots, cfg.doc_features, structure,
                                cfg.speaker_roles)

    def _config(self, config: Config | None) -> Config:
        if config is None:
            return self.config
        if not isinstance(config, Config):
            raise InputTypeError(f"config: expected Config, got {type(config).__name__}")
        changed = [f for f in LEARNING_FIELDS if getattr(config, f) != getattr(self.config, f)]
        if changed:
            raise ConfigError(f"config: a per-call config may change scoring fields only, not "
                              f"what feedback learns ({', '.join(changed)}); use "
                              f"Reranker.with_config(...) for another learning setup")
        return config

    # ------------------------------------------------- state calls, sync or async

    def _on_state(self, call: Call) -> Any:
        return call.send(self.state)

    def _async_state(self) -> Callable[[Call], Awaitable[Any]] | None:
        """How the async methods reach the state: its async twin for the running loop (see
        :class:`~heaprank.state.base.AsyncStateBackend`), or None (a worker thread then)."""
        provider = getattr(self.state, "async_backend", None)
        twin: AsyncStateBackend | None = provider() if provider is not None else None
        if twin is None:
            return None
        if self.config.co_use is not None and not isinstance(twin, AsyncEdgeBackend):
            return None  # co-use edges need a twin that reads and writes them, or the thread
        return functools.partial(Call.send, target=twin)

    def rerank(self, query: str, candidates: Sequence[CandidateLike], *, namespace: str = "default",
               k: int = 10, now: Any = None, track: bool = True,
               config: Config | None = None) -> Ranking:
        """Score ``candidates`` for ``query`` and return the top ``k``, best first.

        Args:
            query: The user's question (an empty one is valid: ranked by the other signals).
            candidates: Candidates from any retriever (:class:`Candidate`, mappings, adapters).
            namespace: Whose learned links to use and update (one user, one agent).
            k: How many results to return (the "shown" ones that feedback refers to).
            now: The current time (epoch seconds, datetime, ISO string); the wall clock if None.
            track: Write the impression so ``feedback(recall_id, ...)`` can follow.
            config: Override this reranker's *scoring* settings for one call (weights, floors,
                half-life, ...). Learning settings (prior, credit, rejects, doc and tag
                features) belong to the reranker: changing them here is a ``ConfigError``.

        Raises:
            InputError: bad candidates, ``k < 1``, blank namespace (the message names the field).
            TypeError: a value of the wrong type.
        """
        return drive(self._rerank(query, candidates, namespace, k, now, track, config,
                                  self._state_version()), self._on_state)

    async def arerank(self, query: str, candidates: Sequence[CandidateLike], *,
                      namespace: str = "default", k: int = 10, now: Any = None, track: bool = True,
                      config: Config | None = None) -> Ranking:
        """Async :meth:`rerank`. On a state with an async client (Redis from a URL) its round
        trips are awaited on the event loop; on the others it runs in a worker thread."""
        on_state = self._async_state()
        if on_state is None:
            return await asyncio.to_thread(self.rerank, query, candidates, namespace=namespace,
                                           k=k, now=now, track=track, config=config)
        # No kept links here: the twin's requests are not ordered after a read of the sync
        # state's version.
        return await adrive(self._rerank(query, candidates, namespace, k, now, track, config,
                                         None), on_state)

    def _rerank(self, query: str, candidates: Sequence[CandidateLike], namespace: str, k: int,
                now: Any, track: bool, config: Config | None,
                version: object) -> Flow[Call, Ranking]:
        """:meth:`rerank` as a flow: its state read and impression write are requests.
        ``version``: the state's version read just before, or None (see :meth:`_row_links`)."""
        query = check_query(query)
        namespace = check_namespace(namespace)
        k = _check_k(k)
        cfg = self._config(config)
        when, explicit = resolve_now(now)
        batch = coerce_candidates(candidates, now=when, on_invalid=cfg.on_invalid,
                                  future_tolerance_s=cfg.future_tolerance_s)
        info = self._space.query(query, self.classify)
        rel, other_scores = self._relevance(batch, info, cfg)
        # Work on the distinct rows: candidates share a few dozen shapes at most.
        urows, row_of = self._feature_rows(info, batch, cfg,
                                           None if other_scores is None else rel)
        co_use = cfg.co_use if cfg.weights.association > 0 else None
        links, docs, edge_rows, state_flag = yield from self._row_links(
            namespace, urows, batch.ids, co_use is not None, version)
        if state_flag:
            track = False
        use = links.usefulness[row_of]
        # fmax(x, NaN) is x: a last_used no candidate gave is skipped, bit for bit
        last = docs.last_used if batch.absent("last_used") else np.fmax(docs.last_used,
                                                                         batch.last_used)
        last = np.fmax(last, batch.created_at)
        age = when - last
        imp = sig.importance(batch, cfg.kind_importance)
        usage = sig.usage_signals(cfg, namespace, age, imp, docs.use_count)
        sampled = self._explore(cfg, links.alpha, links.beta)
        ranked_use = use if sampled is None else linkmath.noisy_or(sampled[links.where])[row_of]
        columns = {
            "relevance": rel,
            "recency": usage.recency,
            "importance": imp,
            "usefulness": ranked_use,
            "reinforcement": usage.reinforcement,
            "association": 1.0,
        }
        values = tuple(map(columns.__getitem__, SIGNALS))
        signal_matrix = rank.matrix(len(batch), values)
        weights = self._weights(cfg, info)
        mult, fired = apply_rules(batch, self.rules, cfg.superseded_multiplier, when,
                                  forgotten=usage.forgotten)
        log_score, log_terms, log_rules = rank.combine(signal_matrix, weights.array, mult,
                                                      no_rule_fired=not fired,
                                                      off=rank.zero_mask(weights, values))
        linked = None
        if co_use is not None:  # spreads from the base score: every other signal and the rules
            linked = _associate(log_score, edge_rows, when, co_use)
            signal_matrix[:, SIGNALS.index("association")] = linked.factor
            log_score, log_terms, log_rules = rank.combine(signal_matrix, weights.array, mult,
                                                          no_rule_fired=not fired, off=weights.off)
        # Every signal is positive and finite: only a rule that fired can drop a candidate
        kept = np.isfinite(log_score) if fired else None
        all_kept = kept is None or bool(kept.all())
        # Best first; ties keep the retriever's order (relevance, then input position: the
        # sort is stable).
        order = rank.best_first(log_score, rel)
        if kept is not None and not all_kept:
            order = order[kept[order]]
        top = order[:k]
        positions = top.tolist()
        (top_rows,) = rank.take(top, (row_of,))
        recall_id = new_recall_id()
        if track and len(top):
            # The mean usefulness is what was believed; an explored rerank adds its sample.
            extra = usage.stored if sampled is None else {**usage.stored,
                                                          "usefulness_sampled": ranked_use}
            if linked is not None:
                extra = {**extra, "association": linked.factor}
            # one row per shown item (only those: k of n): IMPRESSION_SIGNALS, then the extras
            stored = rank.matrix(len(batch), (rel, age, imp, use, mult, *extra.values()), top)
            stored[:, 1] /= DAY_S
            impression = Impression(
                recall_id, namespace, info.qtype, when, explicit,
                tuple(map(batch.ids.__getitem__, positions)),
                self._space.slots_of_rows(list(map(urows.tolist().__getitem__, top_rows))),
                cfg.doc_features,
                IMPRESSION_SIGNALS + tuple(extra) if extra else IMPRESSION_SIGNALS, stored)
            recall_id, recorded = yield from self._track(impression)
            if recorded and self._keep_impressions and recall_id == impression.recall_id:
                self._keep(recall_id, impression)
            if version is not None:  # the link means its feedback would read, while they hold
                _remember(self._means, recall_id, (version, links.p, top_rows))

        def notes(i: int) -> dict[str, str]:
            out = usage.notes(i, float(docs.use_count[i]), cfg.reinforcement_cap)
            if sampled is not None:
                out["usefulness"] = f"explored: sampled usefulness, mean {use[i]:.2f}"
            if linked is not None and linked.partner[i] >= 0:
                out["association"] = _co_used_with(batch, linked, i)
            return out

        items = self._build_items(batch, info, cfg, weights, top, positions, log_score,
                                  signal_matrix, links, top_rows, fired, age, docs.use_count,
                                  state_flag,
                                  notes if usage.stored or sampled is not None or linked is not None
                                  else None, other_scores)
        dropped = {} if kept is None or all_kept else {
            batch.ids[i]: "rule " + ", ".join(f"{n} x{m:g}" for n, m in fired[i])
            for i in np.flatnonzero(~kept).tolist()}
        return new_ranking(recall_id, namespace, query, info.qtype, items,
                           tuple(map(batch.ids.__getitem__, order.tolist())), log_score[order],
                           log_terms[order], SIGNALS,
                           log_rules[order] if fired else log_rules,  # (no rule: all zeros)
                           dropped)

    def _state_version(self) -> object:
        """The sync state's ``version`` (None without one, or when it cannot be read): while it
        stands, the links of a set of feature rows are unchanged (see :meth:`_row_links`)."""
        if not hasattr(self.state, "read_docs"):
            return None  # it could not read its documents alone
        try:
            return getattr(self.state, "version", None)
        except StateUnavailableError:
            return None  # the read reports it

    def _row_links(self, namespace: str, urows: np.ndarray, ids: Sequence[str], edges: bool,
                   version: object
                   ) -> Flow[Call, tuple[_RowLinks, DocStats, EdgeRows | None, tuple[str, ...]]]:
        """``(links, docs, edge rows, flag)`` of the distinct feature rows ``urows``: their
        links (:class:`_RowLinks`), the documents' stats, the co-use edges among ``ids`` (read
        when ``edges``), and the EXPLAIN flag when the state could not be read.

        ``version`` is the state's version read before this flow's requests (None: the state
        has none, or the requests go elsewhere, such as an async twin). A state with a version
        (memory: bumped by every change of its link counts; SQLite: also changed by any other
        connection's commit) lets the links be reused while the version stands: reranks
        between two feedbacks read the documents (and edges) only. A change between the
        version read and the counts read stores links newer than their version: the next
        rerank sees a newer version and reads again, so what is kept is never stale.
        """
        key = (namespace, self._space.generation, urows.tobytes())
        hit = self._row_cache.get(key) if version is not None else None
        kept = hit[1] if hit is not None and hit[0] == version else None
        matrix = self._space.matrix(urows) if kept is None else kept.matrix
        names: list[str] = []
        if kept is None:
            vocab, where = np.unique(matrix, return_inverse=True)
            names = list(map(self._space.names.__getitem__, vocab.tolist()))
        flag: tuple[str, ...] = ()
        edge_rows: EdgeRows | None = None
        try:
            if edges:  # no edges fetched unless they count
                self._edge_state()  # a state without edges is a ConfigError, not an outage
                counts, docs, edge_rows = yield Call("read_with_edges", (namespace, names, ids))
            elif kept is not None:  # a state with a version reads its documents alone
                docs = yield Call("read_docs", (namespace, ids))
            else:
                counts, docs = yield Call("read", (namespace, names, ids))
        except StateUnavailableError as exc:
            if self.strict:
                raise
            logger.warning("heaprank: state unavailable, ranking on the retriever and the "
                           "priors: %s", exc)
            if kept is not None:  # rank on the priors, not on what was kept
                kept = None
                vocab, where = np.unique(matrix, return_inverse=True)
            counts, docs = _no_state(len(vocab), len(ids))
            flag = ("state unavailable: priors only, not tracked",)
        if kept is not None:
            return kept, docs, edge_rows, flag
        alpha, beta = linkmath.posterior(counts, self.config.prior)
        shaped = where.reshape(matrix.shape)
        row_p = linkmath.posterior_mean(alpha, beta)[shaped]
        links = _RowLinks(matrix, shaped, alpha, beta, row_p, linkmath.noisy_or(row_p), {}, {})
        if version is not None and not flag:
            if len(self._row_cache) >= ROW_CACHE_ENTRIES:
                self._row_cache.clear()
            self._row_cache[key] = (version, links)
        return links, docs, edge_rows, flag

    def _top_links(self, links: _RowLinks,
                   rows: list[int]) -> dict[int, tuple[tuple[str, float], ...]]:
        """The :data:`TOP_LINKS` strongest links ``(feature, p)`` of these rows, strongest first
        (ties in the row's order), worked out for the rows not seen yet and kept with
        ``links`` (while they are kept, a row's top links are too)."""
        known = links.top_links
        if known.keys() >= set(rows):  # the usual case, while the links are kept
            return known
        missing = [r for r in dict.fromkeys(rows) if r not in known]
        if missing:
            names, at = self._space.names, np.array(missing)
            p, matrix = links.p[at], links.matrix[at]
            best = np.argsort(-p, axis=1, kind="stable")[:, :TOP_LINKS]
            which = np.arange(len(missing))[:, None]
            for r, ids, ps in zip(missing, matrix[which, best].tolist(), p[which, best].tolist()):
                known[r] = tuple(zip([names[f] for f in ids], ps))
        return known

    def _explore(self, cfg: Config, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray | None:
        """For a share ``exploration_rate`` of reranks, one Thompson draw of every link from its
        Beta posterior (the links of this rerank's features); otherwise None. No draw at all
        when the rate is 0, so exploration off ranks exactly as before."""
        if cfg.exploration_rate <= 0.0:
            return None
        with self._explore_lock:  # a numpy Generator is not thread-safe
            if self._explore_rng.random() >= cfg.exploration_rate:
                return None
            return self._explore_rng.beta(alpha, beta)

    def _edge_state(self) -> EdgeBackend:
        """The state, as one that stores co-use edges (every backend of heaprank does)."""
        if not isinstance(self.state, EdgeBackend):
            raise ConfigError(f"co_use: the state {type(self.state).__name__} stores no co-use "
                              f"edges (it has no read_with_edges / list_edges)")
        return self.state

    def _keep(self, recall_id: str, impression: Impression) -> None:
        """Keep a stored impression for its feedback, dropping those past
        :data:`KEPT_IMPRESSION_S` first (oldest first: the cache is in insertion order), so a
        namespace forgotten through another process leaves this one within that time."""
        now = time.monotonic()
        stored = self._stored
        try:
            while stored and now - next(iter(stored.values()))[0] > KEPT_IMPRESSION_S:
                stored.pop(next(iter(stored)), None)
        except (StopIteration, RuntimeError):  # another thread changed it meanwhile
            pass
        _remember(stored, recall_id, (now, impression))

    def _track(self, impression: Impression) -> Flow[Call, tuple[str, bool]]:
        """Write a rerank's impression: ``(recall id, whether it was stored)``. With an
        unreachable state (and not strict) the ranking is still returned, its feedback then
        reports an unknown recall."""
        try:
            return (yield from self._put_impression(impression)), True
        except StateUnavailableError as exc:
            if self.strict:
                raise
            logger.warning("heaprank: state unavailable, impression not recorded: %s", exc)
            return impression.recall_id, False

    def _put_impression(self, impression: Impression,
                        feedback_id: str | None = None) -> Flow[Call, str]:
        """Write an impression; a generated recall id that is already taken (two reranks in one
        millisecond drawing the same 20 random bits) is drawn again."""
        for _ in range(8):
            held = yield Call("put_impression", (impression,), {"feedback_id": feedback_id})
            if held is not None:
                return held
            impression = replace(impression, recall_id=new_recall_id())
        raise StateError("could not draw an unused recall id")

    @staticmethod
    def _relevance(batch: CandidateBatch, info: QueryInfo,
                   cfg: Config) -> tuple[np.ndarray, np.ndarray | None]:
        """Relevance, and the other retriever scores blended into it (``None`` without
        ``fusion_weights``)."""
        rel = sig.relevance(batch.scores, kind=cfg.score_kind, floor=cfg.relevance_floor,
                            rank_tau=cfg.rank_tau)
        if not info.has_content:
            return np.ones_like(rel), None
        if not cfg.fusion_weights:
            return rel, None
        extra = fusion.retriever_scores(batch, tuple(cfg.fusion_weights))
        return fusion.fuse(rel, extra, tuple(cfg.fusion_weights.values()),
                           cfg.relevance_floor), extra

    @staticmethod
    def _weights(cfg: Config, info: QueryInfo) -> rank.WeightRow:
        """This question's signal exponents: its type's weights (``qtype_weights``), the
        recency weight scaled by its temporal intent (``intent_recency``)."""
        return rank.weight_row(cfg.weights_for(info.qtype), cfg.intent_recency.get(info.intent))

    def _build_items(self, batch: CandidateBatch, info: QueryInfo, cfg: Config,
                     weight_row: rank.WeightRow, top: np.ndarray, positions: list[int],
                     log_score: np.ndarray, signal_matrix: np.ndarray, links: _RowLinks,
                     top_rows: list[int], fired: dict[int, list[tuple[str, float]]],
                     age: np.ndarray, use_count: np.ndarray, state_flag: tuple[str, ...] = (),
                     notes: Callable[[int], dict[str, str]] | None = None,
                     other_scores: np.ndarray | None = None) -> tuple[Ranked, ...]:
        """The top results (``positions``: ``top`` as a list); ``top_rows`` are their distinct
        rows in ``links``; ``notes(i)`` adds to candidate ``i``'s EXPLAIN details;
        ``other_scores`` are the retriever scores fused into relevance.

        Everything shared by the results of one call (the weights, the EXPLAIN template, the
        flags) is built once; each result's EXPLAIN line is composed when first asked for, and
        its signals and details (but details with notes) are made when first read, from one
        :class:`ResultSource` of the call.
        """
        weights = dict(zip(SIGNALS, weight_row.values))
        top_links = self._top_links(links, top_rows)
        # what the scores and the details read, the k shown only
        no_importance, no_sources = batch.absent("importance"), batch.absent("source_count")
        logs, scores, ages, uses, rows, *more = rank.take(top, (
            log_score, batch.scores, age, use_count, signal_matrix,
            *(() if no_importance else (batch.importance,)),
            *(() if no_sources else (batch.source_count,))))
        nan = [math.nan] * len(positions)
        importance = nan if no_importance else more.pop(0)
        source_count = nan if no_sources else more.pop(0)
        self._details(batch, info, cfg, positions, rows, scores, importance, source_count, ages,
                      uses, other_scores)
        source = ResultSource(SIGNALS, explain_template(SIGNALS, weight_row.values), rows, top_rows,
                              links.link_texts)
        flags = state_flag + (() if info.has_content else (
            "query has no content words: ranked by the other signals",))
        stored, own_flags, k = batch.items, batch.flags, len(positions)
        candidates = [item if type(item) is Candidate else batch.candidate(i)
                      for i, item in zip(positions, map(stored.__getitem__, positions))]
        try:
            final = list(map(math.exp, logs))
        except OverflowError:  # past the float range: inf, as exp_score gives
            final = list(map(exp_score, logs))
        details: list[dict[str, str] | ResultSource] | itertools.repeat[ResultSource]
        if notes is None:
            details = itertools.repeat(source)
        else:
            details = []
            for j, i in enumerate(positions):
                made = source.details(j)
                for name, note in notes(i).items():
                    made[name] = f"{made[name]}, {note}" if name in made else note
                details.append(made)
        rules = [tuple(fired.get(i, ())) for i in positions] if fired else itertools.repeat(())
        shown_flags = [own_flags[i] + flags if flags else own_flags[i] for i in positions]
        return tuple(new_ranked_many(list(zip(
            range(1, k + 1), final, candidates, itertools.repeat(source),
            itertools.repeat(weights), details, map(top_links.__getitem__, top_rows), rules,
            shown_flags, itertools.repeat(source)))))

    @staticmethod
    def _details(batch: CandidateBatch, info: QueryInfo, cfg: Config, positions: list[int],
                 rows: list[list[Any]], scores: list[float], importance: list[float],
                 source_count: list[float], ages_s: list[float], use_counts: list[float],
                 other_scores: np.ndarray | None = None) -> None:
        """What each signal value of these candidates came from, for EXPLAIN: appended to each
        one's row of signal values, its three details (:data:`DETAIL_NAMES`) then a place for
        its top links' text (see :class:`ResultSource`). ``scores`` to ``use_counts`` are
        theirs, in the order of ``positions``; ``other_scores`` are the retriever scores fused
        into relevance (one row per candidate of the batch)."""
        fused_names = tuple(cfg.fusion_weights)
        asks = f", asks for {info.intent}" if info.intent in cfg.intent_recency else ""
        has_content, kinds = info.has_content, batch.kinds
        all_nan = None
        for row, i, score, imp, sources, age_s, uses in zip(
                rows, positions, scores, importance, source_count, ages_s, use_counts):
            if not has_content:
                rel = "empty query"
            elif score != score:  # NaN
                if all_nan is None:
                    all_nan = bool(np.isnan(batch.scores).all())
                rel = f"rank {i + 1}" if all_nan else "no valid score"
            else:
                rel = f"score {score:.4g}"
            if other_scores is not None:  # the other retriever scores fused into relevance
                rel += "".join(f", {n} {v:.4g}" if v == v else f", no {n}"
                               for n, v in zip(fused_names, other_scores[i].tolist()))
            if age_s != age_s:
                rec = "no date"
            elif uses > 0:
                rec = f"age {age_s / DAY_S:.1f}d, used {uses:g}x"
            else:
                rec = f"age {age_s / DAY_S:.1f}d"
            if asks:
                rec += asks
            origin = "explicit" if imp == imp else kinds[i] or "default"
            if sources == sources:
                origin += f", {sources:g} sources"
            row += rel, rec, origin, ""

    # ---------------------------------------------------------------- feedback

    def _impression(self, recall_id: object, namespace: str | None) -> Flow[Call, Impression]:
        """The impression of a recall: the one this reranker stored, or read from the state.
        What a stored impression holds never changes (its verdicts live in the state, and the
        state checks them, and that the recall still exists, inside the feedback's own write),
        so the copy kept here saves a read per feedback (a round trip on Redis)."""
        recall_id = check_id(recall_id, "recall_id")
        kept = self._stored.get(recall_id)
        if kept is not None and time.monotonic() - kept[0] <= KEPT_IMPRESSION_S:
            imp = kept[1]
        else:
            imp = yield Call("get_impression", (recall_id,))
        if imp is None:
            raise FeedbackError(f"recall_id {recall_id!r}: unknown (never recorded, expired or "
                                f"pruned)")
        if namespace is not None and imp.namespace != check_namespace(namespace):
            # Says nothing of the namespace that does own it.
            raise FeedbackError(f"recall_id {recall_id!r} is not a recall of namespace "
                                f"{namespace!r}")
        return imp

    def _resolve(self, recall_id: str, namespace: str | None, verdicts: dict[str, bool] | None,
                 used: Sequence[str], now: Any) -> Flow[Call, FeedbackOutcome]:
        """Apply verdicts on a recall's shown items; ``verdicts=None``: ``used`` are used, every
        other shown item ignored."""
        imp = yield from self._impression(recall_id, namespace)
        if verdicts is None:
            verdicts = dict.fromkeys(imp.ids, False)
            verdicts.update(dict.fromkeys(used, True))  # an id not shown is rejected in _batch
        return (yield Call("apply_feedback", (self._batch(imp, verdicts, now), self._credit())))

    def _batch(self, imp: Impression, verdicts: dict[str, bool], now: Any) -> FeedbackBatch:
        """The feedback batch of verdicts on an impression's shown items."""
        position = dict(zip(imp.ids, range(1, len(imp.ids) + 1)))
        if not position.keys() >= verdicts.keys():
            unknown = next(d for d in verdicts if d not in position)  # the first, in order
            raise FeedbackError(f"id {unknown!r} was not shown in recall {imp.recall_id!r}")
        if now is None:
            # The impression's clock, when the caller chose it: never mix in the wall clock.
            when = imp.time if imp.time_explicit else resolve_now(None)[0]
        else:
            when = to_epoch(now, "now")
        expand, qtype, slots, docs = self._space.expand, imp.qtype, imp.slots, imp.doc_features
        reject_weight = self._reject_weight
        # What this rerank read of the shown items' links, for a state that can tell they
        # still hold (FeedbackBatch.means)
        read = self._means.pop(imp.recall_id, None) if self.config.em_credit else None
        means: dict[int, np.ndarray] = {}
        items = []
        for d, used in verdicts.items():
            rank = position[d]
            items.append(new_feedback_item(d, rank, used, expand(qtype, slots[rank - 1],
                                                                 d if docs else None),
                                           reject_weight(rank)))
            if used and read is not None and rank <= len(read[2]):
                means[rank] = read[1][read[2][rank - 1]]
        prior, co_use = self.config.prior, self.config.co_use
        if co_use is not None:
            self._edge_state()  # refused before anything is applied
        return FeedbackBatch(recall_id=imp.recall_id, namespace=imp.namespace, time=when,
                             items=tuple(items), a0=prior.a0, b0=prior.b0, kappa=prior.kappa,
                             em=self.config.em_credit, co_use=co_use,
                             shown=imp.ids if co_use is not None else (), means=means,
                             means_version=None if read is None else read[0])

    def _reject_weight(self, rank: int) -> float:
        """The reject weight of an ignored item shown at ``rank`` (from 1)."""
        if self.config.reject_discount != "log":
            return 1.0
        return _LOG_DISCOUNT[rank] if rank < len(_LOG_DISCOUNT) else 1.0 / math.log2(1.0 + rank)

    def _credit(self) -> functools.partial[tuple[list[str], np.ndarray, np.ndarray]]:
        return functools.partial(linkmath.credit, prior=self.config.prior, em=self.config.em_credit)

    @staticmethod
    def _ids(ids: object, field: str) -> tuple[str, ...]:
        if isinstance(ids, str):
            return (check_id(ids, field),)
        if not isinstance(ids, (list, tuple)) and isinstance(ids, Iterable) \
                and not isinstance(ids, (bytes, Mapping)):
            ids = tuple(ids)  # a set or a generator of ids
        return check_ids(ids, field)

    def feedback(self, recall_id: str | None = None, used: Iterable[str] | str = (), *,
                 now: Any = None, namespace: str | None = None, query: str | None = None,
                 shown: Sequence[CandidateLike] | None = None,
                 feedback_id: str | None = None) -> FeedbackOutcome:
        """Report which shown items the answer used; every other shown item counts as ignored.

        Either pass the ``recall_id`` of a :class:`Ranking` (from any process sharing the state;
        with ``namespace=`` it must be a recall of that namespace), or the explicit form
        ``namespace=, query=, shown=[candidates in shown order], used=`` (with ``feedback_id=``
        a retry-safe id of your own, scoped to the namespace). Feedback is applied once per
        (recall, item): sending it again changes nothing.

        Raises:
            FeedbackError: unknown recall id, a recall of another namespace, an id that was not
                shown, a reused ``feedback_id`` with another shown list, or a contradiction of
                feedback already recorded.
        """
        if recall_id is not None and feedback_id is None:
            apply_used = getattr(self.state, "apply_used", None)
            if apply_used is not None:
                if type(used) is not list and type(used) is not tuple and type(used) is not str:
                    used = self._ids(used, "used")  # a set or a generator: read once, here
                done = self._fast_feedback(apply_used, recall_id, namespace, used, now)
                if done is not None:
                    return done
        return drive(self._feedback(recall_id, used, now, namespace, query, shown, feedback_id),
                     self._on_state)

    async def afeedback(self, recall_id: str | None = None, used: Iterable[str] | str = (), *,
                        now: Any = None, namespace: str | None = None, query: str | None = None,
                        shown: Sequence[CandidateLike] | None = None,
                        feedback_id: str | None = None) -> FeedbackOutcome:
        """Async :meth:`feedback`. On a state with an async client (Redis from a URL) its round
        trips are awaited on the event loop; on the others it runs in a worker thread."""
        on_state = self._async_state()
        if on_state is None:
            return await asyncio.to_thread(self.feedback, recall_id, used, now=now,
                                           namespace=namespace, query=query, shown=shown,
                                           feedback_id=feedback_id)
        return await adrive(self._feedback(recall_id, used, now, namespace, query, shown,
                                           feedback_id), on_state)

    def _feedback(self, recall_id: str | None, used: Iterable[str] | str, now: Any,
                  namespace: str | None, query: str | None, shown: Sequence[CandidateLike] | None,
                  feedback_id: str | None) -> Flow[Call, FeedbackOutcome]:
        """:meth:`feedback` as a flow: its state calls are requests."""
        used_ids = self._ids(used, "used")
        if recall_id is None:
            if namespace is None or query is None or shown is None:
                raise InputError("feedback: pass recall_id, or namespace=, query= and shown=")
            recall_id = yield from self._record_shown(namespace, query, shown, used_ids, now,
                                                      feedback_id)
        elif feedback_id is not None:
            raise InputError("feedback_id: only with the explicit form (namespace=, query=, "
                             "shown=), not with a recall_id")
        return (yield from self._resolve(recall_id, namespace, None, used_ids, now))

    def _fast_feedback(self, apply_used: Callable[..., FeedbackOutcome | None], recall_id: object,
                       namespace: str | None, used: list[str] | tuple[str, ...] | str,
                       now: Any) -> FeedbackOutcome | None:
        """The memory backend's lean path for a fresh recall (its ``apply_used``), or ``None``
        where the general path must run (co-use on, an error).

        ``used`` is not checked id by id here: ``apply_used`` takes it only when every entry is
        one of the shown ids, which were checked when they were shown, and it is a list of
        strings (a join of anything else raises); any other ``used`` goes the general way,
        whose checks raise the errors."""
        cfg = self.config
        if cfg.co_use is not None or not isinstance(recall_id, str):
            return None
        if type(used) is str:
            used = (used,)
        else:
            try:
                "".join(used)
            except TypeError:
                return None  # an entry that is not a str
        try:
            when = None if now is None else to_epoch(now, "now")
        except (ValueError, TypeError):
            return None  # raised by the general path, after its own checks of the recall
        read = self._means.get(recall_id) if cfg.em_credit else None
        prior = cfg.prior
        out = apply_used(UsedFeedback(recall_id, namespace, used, when, prior.a0, prior.b0,
                                      prior.kappa, cfg.em_credit,
                                      _LOG_DISCOUNT if cfg.reject_discount == "log"
                                      else _NO_DISCOUNT, self._reject_weight, read))
        if out is not None:
            self._means.pop(recall_id, None)
        return out

    def feedback_many(self, requests: Iterable[tuple[str, Iterable[str] | str]], *,
                      now: Any = None) -> list[FeedbackOutcome | FeedbackError]:
        """Several ``feedback(recall_id, used)`` calls applied together: on SQLite in one
        transaction (one commit: a group commit), elsewhere one after the other.

        Each feedback is still atomic and idempotent on its own. Returns one entry per request,
        in order: its :class:`FeedbackOutcome`, or the :class:`FeedbackError` that kept it from
        being applied (the others are applied all the same).
        """
        batches: list[FeedbackBatch | FeedbackError] = []
        for recall_id, used in requests:
            try:
                imp = drive(self._impression(recall_id, None), self._on_state)
                verdicts = {d: False for d in imp.ids}
                verdicts.update({d: True for d in self._ids(used, "used")})
                batches.append(self._batch(imp, verdicts, now))
            except FeedbackError as exc:
                batches.append(exc)
        ready = [b for b in batches if isinstance(b, FeedbackBatch)]
        many = getattr(self.state, "apply_feedback_many", None)
        done: list[FeedbackOutcome | FeedbackError]
        if many is not None:
            done = many(ready, self._credit())
        else:
            done = []
            for batch in ready:
                try:
                    done.append(self.state.apply_feedback(batch, self._credit()))
                except FeedbackError as exc:
                    done.append(exc)
        applied = iter(done)
        return [b if isinstance(b, FeedbackError) else next(applied) for b in batches]

    def _record_shown(self, namespace: str, query: str, shown: Sequence[CandidateLike],
                      used: tuple[str, ...], now: Any, feedback_id: str | None) -> Flow[Call, str]:
        namespace = check_namespace(namespace)
        query = check_query(query)
        if feedback_id is not None:
            if not isinstance(feedback_id, str):
                raise InputTypeError(f"feedback_id: expected str, got {type(feedback_id).__name__}")
            if not feedback_id or len(feedback_id) > MAX_NAMESPACE_CHARS:
                raise InputError(f"feedback_id: must be 1 to {MAX_NAMESPACE_CHARS} characters")
        when, explicit = resolve_now(now)
        cfg = self.config
        batch = coerce_candidates(shown, now=when, on_invalid=cfg.on_invalid,
                                  future_tolerance_s=cfg.future_tolerance_s)
        unknown = [d for d in used if d not in set(batch.ids)]
        if unknown:  # checked before anything is written: no orphan impression
            raise FeedbackError(f"used id {unknown[0]!r} is not among the shown ids")
        info = self._space.query(query, self.classify)
        rel, other_scores = self._relevance(batch, info, cfg)
        urows, row_of = self._feature_rows(info, batch, cfg,
                                           None if other_scores is None else rel)
        held = yield from self._put_impression(Impression(
            recall_id=new_recall_id(), namespace=namespace, qtype=info.qtype, time=when,
            time_explicit=explicit, ids=batch.ids,
            slots=tuple(self._space.slots_of(r) for r in urows[row_of].tolist()),
            doc_features=cfg.doc_features), feedback_id)
        if feedback_id is not None:
            stored = yield Call("get_impression", (held,))
            if stored is None or stored.ids != batch.ids:
                raise FeedbackError(f"feedback_id {feedback_id!r} was already used in this "
                                    f"namespace for another shown list")
        return held

    def mark_used(self, recall_id: str, ids: Iterable[str] | str, *, now: Any = None,
                  namespace: str | None = None) -> FeedbackOutcome:
        """Record that these shown items were used; the rest of the impression stays open."""
        verdicts = {d: True for d in self._ids(ids, "ids")}
        return drive(self._resolve(recall_id, namespace, verdicts, (), now), self._on_state)

    def mark_ignored(self, recall_id: str, ids: Iterable[str] | str, *, now: Any = None,
                     namespace: str | None = None) -> FeedbackOutcome:
        """Record that these shown items were not used."""
        verdicts = {d: False for d in self._ids(ids, "ids")}
        return drive(self._resolve(recall_id, namespace, verdicts, (), now), self._on_state)

    # ---------------------------------------------------------------- audit

    def links(self, namespace: str = "*", *, min_n: float = 0.0, level: float = 0.9) -> list[Link]:
        """Every learned link, strongest first: P(useful), evidence ``n`` and a ``level`` interval.

        ``namespace="*"`` lists the pooled global layer; a namespace lists its own links with
        the pooled prior it borrows.
        """
        cfg = self.config
        if namespace == "*":
            features, pos, neg = self.state.list_links(None)
            alpha, beta = linkmath.global_posterior(pos, neg, cfg.prior)
        else:
            features, pos, neg = self.state.list_links(check_namespace(namespace))
            alpha, beta = linkmath.posterior(self.state.read_links(namespace, features), cfg.prior)
        if not features:
            return []
        p = linkmath.posterior_mean(alpha, beta)
        low, high = linkmath.interval(alpha, beta, level)
        n = pos + neg
        rows = [Link(f, float(p[i]), float(n[i]), float(low[i]), float(high[i]), float(pos[i]),
                     float(neg[i])) for i, f in enumerate(features) if n[i] >= min_n]
        rows.sort(key=lambda r: (-r.p, r.feature))
        return rows

    def forget_candidates(self, namespace: str, candidates: Sequence[CandidateLike] | None = None,
                          *, now: Any = None, policy: ret.PolicySpec = None) -> ret.ForgetReport:
        """What the retention policy would forget in ``namespace``; deletes nothing.

        Args:
            namespace: The namespace whose documents and policy are examined.
            candidates: The documents to examine, with their ``created_at`` and importance;
                ``None`` examines the documents the state knows (those that were used: the
                state keeps no importance, so they count at the neutral dose 1).
            now: The current time (the wall clock if None).
            policy: Preview another policy (a file path, :class:`RetentionPolicy` or
                :class:`PolicySet`) instead of ``config.retention_policy``.

        Returns:
            A :class:`~heaprank.learning.retention.ForgetReport`: the count and ids, least retained first.

        Raises:
            StateError: ``candidates=None`` on a backend that cannot list its documents.
        """
        namespace = check_namespace(namespace)
        when, _ = resolve_now(now)
        cfg = self.config
        chosen = ret.resolve_policy(cfg.retention_policy if policy is None else policy
                                    ).for_namespace(namespace)
        if candidates is None:
            listing = getattr(self.state, "iter_docs", None)
            if listing is None:
                raise StateError(f"forget_candidates: {self.state!r} cannot list its documents; "
                                 f"pass candidates=")
            rows = listing(namespace)
            ids = tuple(r[0] for r in rows)
            last = np.array([r[1] for r in rows], dtype=np.float64)
            uses = np.array([r[2] for r in rows], dtype=np.float64)
            importance = np.ones(len(ids))
        else:
            batch = coerce_candidates(candidates, now=when, on_invalid=cfg.on_invalid,
                                      future_tolerance_s=cfg.future_tolerance_s)
            docs = self.state.read(namespace, [], batch.ids)[1]
            ids, uses = batch.ids, docs.use_count
            last = np.fmax(np.fmax(docs.last_used, batch.last_used), batch.created_at)
            importance = sig.importance(batch, cfg.kind_importance)
        return ret.forget_report(namespace, ids, (when - last) / DAY_S, importance, uses, chosen)

    def tune(self, namespace: str | None = None, *, fit_half_life: bool = False,
             shrinkage: float = 1.0, namespace_shrinkage: float = 4.0, holdout: float = 0.2,
             min_impressions: int = 50, apply: bool = False) -> TuneResult:
        """Fit the weights (optionally the recency half-life) to the impression log.

        A conditional logit over the shown items of each impression with feedback, shrunk
        toward the current weights (a namespace's fit toward the pooled one), checked on the
        later part of the log; it refuses to move with fewer than ``min_impressions`` usable
        impressions or when the check fails. See :func:`heaprank.learning.tuning.tune` for the
        arguments and docs/design.md, "Tuning and replay".

        Args:
            namespace: ``None``: the pooled fit; ``"*"``: also every namespace's; a namespace:
                also its own, which is then ``result.config`` (use it for that namespace with
                ``rerank(config=...)`` or save it: a reranker has one config for everyone).
            apply: Replace this reranker's config with ``result.config`` (pooled fits only;
                only weights and the half-life change, never the learning fields).
        """
        from .learning.tuning import tune

        if namespace is not None and namespace != "*":
            namespace = check_namespace(namespace)
            if apply:
                raise InputError("apply: a namespace's fit would rank every namespace; pass "
                                 "result.config to rerank(config=...) for that namespace instead")
        result = tune(self.state.feedback_log(None), self.config, namespace=namespace,
                      fit_half_life=fit_half_life, shrinkage=shrinkage,
                      namespace_shrinkage=namespace_shrinkage, holdout=holdout,
                      min_impressions=min_impressions)
        if apply:
            self.config = result.config
        return result

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        """Drop every record of a namespace: evidence, documents, impressions, explicit feedback
        ids and the feature names only it had (and, with ``scrub_global``, its share of the
        pool). This process's feature cache is cleared too."""
        self.state.forget_namespace(check_namespace(namespace), scrub_global=scrub_global)
        self._space.clear()
        self._row_cache.clear()
        self._means.clear()
        self._stored.clear()

    def stats(self) -> dict[str, int]:
        return self.state.stats()

    def close(self) -> None:
        self.state.close()

    async def aclose(self) -> None:
        """:meth:`close` from an event loop, releasing the state's async client of that loop."""
        release = getattr(self.state, "aclose_loop", None)
        if release is not None:
            await release()
        self.close()

    def __enter__(self) -> Reranker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def with_config(self, **changes: Any) -> Reranker:
        """A reranker on the same state with some config fields changed."""
        return self._clone(self.state, replace(self.config, **changes))

    def with_state(self, state: str | StateBackend) -> Reranker:
        """The same reranker (config, rules, classifier, feature cache) on another state: for
        example a read-only or leave-one-namespace-out view of this one's, for evaluation."""
        return self._clone(open_state(state), self.config)

    def _clone(self, state: StateBackend, config: Config) -> Reranker:
        clone = Reranker(state, config=config, rules=self.rules, question_classifier=self.classify,
                         strict=self.strict)
        if config.feature_prefix_chars == self.config.feature_prefix_chars:
            clone._space = self._space  # the same texts featurise the same way: share the cache
        return clone
