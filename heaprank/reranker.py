"""The :class:`Reranker`: score candidates from any retriever, learn from what was used.

A thin facade over the pipeline's stages: scoring (:class:`~heaprank.scoring.scorer.Scorer`,
then :mod:`~heaprank.scoring.explain` for the results), what the state knows of the candidates
(:class:`~heaprank.learning.evidence.EvidenceReader`), the impression log
(:class:`~heaprank.learning.impressions.ImpressionLog`) and the feedback paths
(:class:`~heaprank.learning.feedback.FeedbackStage`). A rerank and a feedback are flows that
yield their state requests (:mod:`heaprank.state.requests`), so the same code runs on the sync
state and, in ``arerank`` / ``afeedback``, on a state's async twin.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._checks import check_k, check_namespace, check_query
from ._flow import Flow, adrive, drive
from ._time import resolve_now
from .config import SIGNALS, Config
from .errors import ConfigError, FeedbackError, InputError, InputTypeError
from .learning import retention as ret
from .learning.audit import Link, forget_preview, links_of
from .learning.evidence import EvidenceReader
from .learning.exploration import Explorer
from .learning.feedback import FeedbackStage, Labels, Used, check_labels, named_only, used_ids
from .learning.impressions import ImpressionLog
from .learning.refit import FittedWeights, Refitter, adopted
from .records import FeedbackBatch, FeedbackOutcome, new_recall_id
from .scoring import explain
from .scoring.candidates import CandidateLike
from .scoring.query import QuestionClassifier, english_question_type
from .scoring.results import Ranking
from .scoring.rules import Rule
from .scoring.scorer import Request, Scorer
from .scoring.space import FeatureSpace
from .state import StateBackend, open_state
from .state.capabilities import AsyncEdgeBackend, capabilities
from .state.requests import AsyncTarget, StateRequest

if TYPE_CHECKING:
    from .learning.tuning import TuneResult

__all__ = ["LEARNING_FIELDS", "Link", "Reranker"]

#: Config fields that shape what feedback learns; a per-call config may not change them (the
#: feedback for that recall would otherwise learn under other settings than the ranking used).
LEARNING_FIELDS = ("prior", "em_credit", "reject_discount", "doc_features", "tag_slots", "co_use",
                   "speaker_roles")


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
        config = config if config is not None else Config()
        if not isinstance(config, Config):
            raise InputTypeError(f"config: expected Config, got {type(config).__name__}")
        self.rules = tuple(rules)
        for rule in self.rules:
            if not isinstance(rule, Rule):
                raise InputTypeError(f"rules: expected Rule objects, got {type(rule).__name__}")
        if not callable(question_classifier):
            raise InputTypeError("question_classifier: expected a callable")
        self.classify = question_classifier
        self.strict = bool(strict)
        if config.recency_kernel == "ebbinghaus" or config.drop_forgotten:
            ret.resolve_policy(config.retention_policy)  # a bad policy file fails here
        self._config = config
        self.state: StateBackend = open_state(state, strict=self.strict)
        self._refit = Refitter(config, self.state)
        self._assemble(FeatureSpace(max_bytes=feature_cache_bytes,
                                    prefix_chars=config.feature_prefix_chars))
        self._adopt()

    def _assemble(self, space: FeatureSpace) -> None:
        """Build the stages around a feature space (a clone shares its original's)."""
        self._caps = capabilities(self.state)
        self._space = space
        self._scorer = Scorer(space, self.classify, self.rules,
                              Explorer(self._config.exploration_seed))
        self._evidence = EvidenceReader(space, self._config.prior,
                                        versioned=self._caps.versioned, strict=self.strict)
        mint = self._caps.recall_ids
        self._impressions = ImpressionLog(strict=self.strict,
                                          keep_copies=not self._caps.local_impressions,
                                          mint=None if mint is None else mint.new_recall_id)
        self._feedback = FeedbackStage(self._config, self._caps, self._scorer, self._impressions)

    def __repr__(self) -> str:
        return f"Reranker(state={self.state!r})"

    @property
    def config(self) -> Config:
        """The weights and settings every rerank uses unless it is given its own."""
        return self._config

    # ---------------------------------------------------------------- rerank

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
        request = self._request(query, namespace, k, now, track, config)
        return drive(self._rerank(request, candidates, self._evidence.version()), self._send)

    async def arerank(self, query: str, candidates: Sequence[CandidateLike], *,
                      namespace: str = "default", k: int = 10, now: Any = None, track: bool = True,
                      config: Config | None = None) -> Ranking:
        """Async :meth:`rerank`. On a state with an async client (Redis from a URL) its round
        trips are awaited on the event loop; on the others it runs in a worker thread."""
        target = self._async_target()
        if target is None:
            return await asyncio.to_thread(self.rerank, query, candidates, namespace=namespace,
                                           k=k, now=now, track=track, config=config)
        request = self._request(query, namespace, k, now, track, config)
        # No kept links here: the twin's requests are not ordered after a read of the sync
        # state's version.
        return await adrive(self._rerank(request, candidates, None), target.send)

    def _request(self, query: str, namespace: str, k: int, now: Any, track: bool,
                 config: Config | None) -> Request:
        if self._refit.next_poll <= time.monotonic():  # (never without continuous re-fits)
            self._adopt()
        query, namespace, k = check_query(query), check_namespace(namespace), check_k(k)
        cfg = self._call_config(config)
        when, explicit = resolve_now(now)
        return Request(query, namespace, k, when, explicit, track, cfg)

    def _rerank(self, request: Request, candidates: Sequence[CandidateLike],
                version: object) -> Flow[StateRequest, Ranking]:
        """A rerank as a flow: its state read and impression write are requests. ``version``:
        the state's version read just before, or None (see :class:`EvidenceReader`)."""
        seen = self._scorer.see(candidates, request)
        cfg = request.config
        evidence = yield from self._evidence.read(
            request.namespace, seen.rows, seen.batch.ids,
            edges=cfg.co_use is not None and cfg.weights.association > 0, version=version)
        scored = self._scorer.score(request, seen, evidence)
        if request.track and not evidence.flags and len(scored.top):
            recall_id, untracked = yield from self._impressions.track(scored, self._space,
                                                                      version)
        else:
            recall_id, untracked = new_recall_id(), None
        top_links = self._evidence.top_links(evidence.links, scored.top_rows)
        return explain.ranking(scored, recall_id, top_links, untracked)

    def _call_config(self, config: Config | None) -> Config:
        if config is None:
            return self._config
        if not isinstance(config, Config):
            raise InputTypeError(f"config: expected Config, got {type(config).__name__}")
        changed = [f for f in LEARNING_FIELDS if getattr(config, f) != getattr(self._config, f)]
        if changed:
            raise ConfigError(f"config: a per-call config may change scoring fields only, not "
                              f"what feedback learns ({', '.join(changed)}); use "
                              f"Reranker.with_config(...) for another learning setup")
        return config

    def _send(self, request: StateRequest) -> Any:
        return request.send(self._caps)

    # ---------------------------------------------------------------- weights

    def _adopt(self) -> None:
        """Rank with the weights stored in the state, if a newer version is there."""
        record = self._refit.poll()
        if record is not None:
            self._config = adopted(self._config, record)

    def _fed(self, outcome: FeedbackOutcome) -> FeedbackOutcome:
        """After a feedback is stored: the re-fit it makes due, if any."""
        if self._refit.due(outcome):
            self.refit()
        return outcome

    def refit(self) -> FittedWeights | None:
        """Re-fit the weights from the state's impression log now and store them in the state
        (what ``Config.refit_every`` does after every that many feedbacks): the record that now
        applies, or None with too little data (or ``refit_every=0``). See docs/design.md,
        "Continuous re-fitting"."""
        record = self._refit.fit(self._config)
        if record is not None:
            self._config = adopted(self._config, record)
        return record

    def _async_target(self) -> AsyncTarget | None:
        """How the async methods reach the state: its async twin for the running loop, or None
        (a worker thread then). Co-use edges need a twin that reads and writes them."""
        provider = self._caps.async_provider
        twin = provider.async_backend() if provider is not None else None
        if twin is None:
            return None
        if self._config.co_use is None:
            return AsyncTarget(twin, None)
        return AsyncTarget(twin, twin) if isinstance(twin, AsyncEdgeBackend) else None

    # ---------------------------------------------------------------- feedback

    def feedback(self, recall_id: str | None = None, used: Used = (), *,
                 now: Any = None, namespace: str | None = None, query: str | None = None,
                 shown: Sequence[CandidateLike] | None = None,
                 feedback_id: str | None = None, labels: Labels | None = None) -> FeedbackOutcome:
        """Report which shown items the answer used; every other shown item counts as ignored.

        ``labels`` grades shown items one by one: ``{id: "used" | "ignored" | "outdated" |
        "wrong"}`` (``outdated``: a newer version should have won, evidence for recency in the
        tuning log, none against its links; ``wrong``: rejects its links as three ignores).

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
        graded = check_labels(labels)
        if recall_id is not None and feedback_id is None and not graded:
            done, used = self._feedback.lean(recall_id, used, namespace, now)
            if done is not None:
                return self._fed(done)
        return self._fed(drive(self._feedback.flow(recall_id, used, now, namespace,
                                                   (query, shown, feedback_id), graded),
                               self._send))

    async def afeedback(self, recall_id: str | None = None, used: Used = (), *,
                        now: Any = None, namespace: str | None = None, query: str | None = None,
                        shown: Sequence[CandidateLike] | None = None,
                        feedback_id: str | None = None,
                        labels: Labels | None = None) -> FeedbackOutcome:
        """Async :meth:`feedback`. On a state with an async client (Redis from a URL) its round
        trips are awaited on the event loop; on the others it runs in a worker thread."""
        target = self._async_target()
        if target is None:
            return await asyncio.to_thread(self.feedback, recall_id, used, now=now,
                                           namespace=namespace, query=query, shown=shown,
                                           feedback_id=feedback_id, labels=labels)
        outcome = await adrive(self._feedback.flow(recall_id, used, now, namespace,
                                                   (query, shown, feedback_id),
                                                   check_labels(labels)), target.send)
        if self._refit.due(outcome):  # the fit itself in a worker thread: off the loop
            await asyncio.to_thread(self.refit)
        return outcome

    def feedback_many(self, requests: Iterable[tuple[str, Used] | tuple[str, Used, Labels]], *,
                      now: Any = None,
                      namespace: str | None = None) -> list[FeedbackOutcome | FeedbackError]:
        """Several ``feedback(recall_id, used)`` calls applied together: on SQLite in one
        transaction (one commit: a group commit), elsewhere one after the other. A request
        may carry a third entry, its ``labels`` (as :meth:`feedback`'s).

        Each feedback is still atomic and idempotent on its own. Returns one entry per request,
        in order: its :class:`FeedbackOutcome`, or the :class:`FeedbackError` that kept it from
        being applied (the others are applied all the same). With ``namespace=`` every recall
        must be one of that namespace (as for :meth:`feedback`).
        """
        batches: list[FeedbackBatch | FeedbackError] = []
        named: list[tuple[str, ...]] = []
        for recall_id, used, *rest in requests:
            graded = check_labels(rest[0] if rest else None)
            try:
                ids = used_ids(used, "used")
                imp = drive(self._feedback.impression(recall_id, namespace), self._send)
                verdicts = self._feedback.verdicts(imp, ids, graded)
                batches.append(self._feedback.batch(imp, verdicts, now, graded))
                named.append((*ids, *graded))
            except FeedbackError as exc:
                batches.append(exc)
        done = iter(self._feedback.apply_many([b for b in batches
                                               if isinstance(b, FeedbackBatch)]))
        ids_of = iter(named)
        out: list[FeedbackOutcome | FeedbackError] = []
        for b in batches:
            if isinstance(b, FeedbackError):
                out.append(b)
                continue
            applied, ids = next(done), next(ids_of)
            out.append(applied if isinstance(applied, FeedbackError)
                       else self._fed(named_only(applied, namespace, ids)))
        return out

    def mark_used(self, recall_id: str, ids: Used, *, now: Any = None,
                  namespace: str | None = None) -> FeedbackOutcome:
        """Record that these shown items were used; the rest of the impression stays open."""
        verdicts = dict.fromkeys(used_ids(ids, "ids"), True)
        return drive(self._feedback.resolve(recall_id, namespace, verdicts, (), now), self._send)

    def mark_ignored(self, recall_id: str, ids: Used, *, now: Any = None,
                     namespace: str | None = None) -> FeedbackOutcome:
        """Record that these shown items were not used."""
        verdicts = dict.fromkeys(used_ids(ids, "ids"), False)
        return drive(self._feedback.resolve(recall_id, namespace, verdicts, (), now), self._send)

    # ---------------------------------------------------------------- audit

    def links(self, namespace: str = "*", *, min_n: float = 0.0, level: float = 0.9) -> list[Link]:
        """Every learned link, strongest first: P(useful), evidence ``n`` and a ``level`` interval.

        ``namespace="*"`` lists the pooled global layer; a namespace lists its own links with
        the pooled prior it borrows.
        """
        scope = None if namespace == "*" else check_namespace(namespace)
        return links_of(self.state, scope, self._config.prior, min_n=min_n, level=level)

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
            A :class:`~heaprank.learning.retention.ForgetReport`: the count and ids, least
            retained first.

        Raises:
            StateError: ``candidates=None`` on a backend that cannot list its documents.
        """
        namespace = check_namespace(namespace)
        when, _ = resolve_now(now)
        chosen = ret.resolve_policy(self._config.retention_policy if policy is None else policy
                                    ).for_namespace(namespace)
        return forget_preview(self.state, self._caps.docs, namespace, candidates, when, chosen,
                              self._config)

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
        result = tune(self.state.feedback_log(None), self._config, namespace=namespace,
                      fit_half_life=fit_half_life, shrinkage=shrinkage,
                      namespace_shrinkage=namespace_shrinkage, holdout=holdout,
                      min_impressions=min_impressions)
        if apply:
            self._config = result.config  # (scoring fields only: the stages keep theirs)
            if result.moved and self._refit.store is not None:  # the other processes too
                self._refit.store_record(FittedWeights(
                    version=0, weights=result.config.weights, fitted_at=time.time(),
                    moved=True, reason="tune(apply=True)", impressions=result.pooled.impressions))
        return result

    # ---------------------------------------------------------------- lifecycle

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        """Drop every record of a namespace: evidence, documents, impressions, explicit feedback
        ids and the feature names only it had (and, with ``scrub_global``, its share of the
        pool). This process's feature cache is cleared too."""
        self.state.forget_namespace(check_namespace(namespace), scrub_global=scrub_global)
        self._space.clear()
        self._evidence.clear()
        self._impressions.clear()

    def stats(self) -> dict[str, Any]:
        """The state's counts, the weights this reranker ranks with (``weights``) and the
        record of their last fit (``weights_fitted``: when, whether it moved, and the held-out
        ``gain`` of the learned signals over relevance alone; None before any fit)."""
        self._adopt()
        record = self._refit.current
        return {**self.state.stats(),
                "weights": {n: getattr(self._config.weights, n) for n in SIGNALS},
                "weights_fitted": None if record is None else record.to_dict()}

    def close(self) -> None:
        self.state.close()

    async def aclose(self) -> None:
        """:meth:`close` from an event loop, releasing the state's async client of that loop."""
        if self._caps.async_provider is not None:
            await self._caps.async_provider.aclose_loop()
        self.close()

    def __enter__(self) -> Reranker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def with_config(self, **changes: Any) -> Reranker:
        """A reranker on the same state with some config fields changed."""
        return self._clone(self.state, replace(self._config, **changes))

    def with_state(self, state: str | StateBackend) -> Reranker:
        """The same reranker (config, rules, classifier, feature cache) on another state: for
        example a read-only or leave-one-namespace-out view of this one's, for evaluation."""
        return self._clone(open_state(state, strict=self.strict), self._config)

    def _clone(self, state: StateBackend, config: Config) -> Reranker:
        clone = Reranker(state, config=config, rules=self.rules, question_classifier=self.classify,
                         strict=self.strict)
        if config.feature_prefix_chars == self._config.feature_prefix_chars:
            clone._assemble(self._space)  # the same texts featurise the same way: share the cache
        return clone
