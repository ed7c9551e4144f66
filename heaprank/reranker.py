"""The :class:`Reranker`: score candidates from any retriever, learn from what was used.

A thin facade over the pipeline's stages, called in order: a rerank is scoring's
:meth:`~heaprank.scoring.scorer.Scorer.see`, what the state knows of the candidates
(:class:`~heaprank.learning.evidence.EvidenceReader`), the score, the impression
(:class:`~heaprank.learning.impressions.ImpressionLog`) and the results
(:mod:`~heaprank.scoring.explain`); a feedback is checked, planned against its impression and
worked out into updates (:class:`~heaprank.learning.feedback.FeedbackStage`), which the state
applies. ``arerank`` / ``afeedback`` make the same calls on a state's async twin.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ._checks import check_k, check_namespace, check_query
from ._time import resolve_now
from .config import SIGNALS, Config
from .errors import ConfigError, FeedbackError, InputError, InputTypeError
from .learning.audit import Link, forget_preview, links_of
from .learning.evidence import EvidenceReader
from .learning.feedback import FeedbackStage, Labels, Used
from .learning.impressions import ImpressionLog
from .learning.learner import Learner
from .learning.refit import FittedWeights, Refitter
from .model import retention as ret
from .model.exploration import Explorer
from .model.questions import QuestionClassifier, english_question_type
from .records import IGNORED, FeedbackOutcome, new_recall_id
from .scoring import explain
from .scoring.candidates import CandidateLike
from .scoring.results import Ranking
from .scoring.rules import Rule
from .scoring.scorer import Request, Scored, Scorer
from .scoring.space import FeatureSpace
from .state import StateBackend, open_state
from .state.capabilities import AsyncEdgeBackend, AsyncStateBackend, capabilities

if TYPE_CHECKING:
    from .learning.tuning import TuneResult

__all__ = ["LEARNING_FIELDS", "Link", "Reranker"]

#: Config fields (``group.field``) that shape what feedback learns; a per-call config may not
#: change them (the feedback for that recall would otherwise learn under other settings than the
#: ranking used).
LEARNING_FIELDS = ("learning.prior", "learning.em_credit", "learning.reject_discount",
                   "learning.co_use", "features.doc_features", "features.tag_slots",
                   "features.answer_slots",
                   "features.speaker_roles", "learning.pooled_min_namespaces")


class Reranker:
    """Re-rank candidates by relevance x recency x importance x learned usefulness x rules.

    Args:
        state: Where learned links live: a URL (``memory://``, ``sqlite:///path.db``) or a
            :class:`~heaprank.StateBackend`; ``None`` keeps them in memory.
        config: Weights and signal settings (:class:`~heaprank.Config`).
        rules: Extra named multipliers (:class:`~heaprank.Rule`).
        question_classifier: Maps a query to a question type (English rules by default).
        feature_cache_bytes: Bound of the per-process feature cache: the candidate shapes,
            feature names and rows, query readings and expanded rows it holds, counted as held
            (it holds no caller text, only what featurisation read from it). A bound below
            ~200 KB leaves little room besides an empty cache's fixed ~100 KB of tables.
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
        if config.retention.recency_kernel == "ebbinghaus" or config.retention.drop_forgotten:
            ret.resolve_policy(config.retention.policy)  # a bad policy file fails here
        self._config = config
        self.state: StateBackend = open_state(state, strict=self.strict)
        self._refit = Refitter(config, self.state)
        #: Reranks of this reranker that degraded (``Ranking.degraded``), for ``stats()``.
        self._degraded = 0
        self._degraded_lock = threading.Lock()
        self._assemble(FeatureSpace(max_bytes=feature_cache_bytes,
                                    prefix_chars=config.features.prefix_chars))
        self._adopt()

    def _assemble(self, space: FeatureSpace) -> None:
        """Build the stages around a feature space (a clone shares its original's)."""
        self._caps = capabilities(self.state)
        self._space = space
        self._scorer = Scorer(space, self.classify, self.rules,
                              Explorer(self._config.exploration.seed))
        self._evidence = EvidenceReader(space, self._config.learning.prior,
                                        versioned=self._caps.versioned, strict=self.strict,
                                        min_namespaces=self._config.learning.pooled_min_namespaces)
        mint = self._caps.recall_ids
        self._impressions = ImpressionLog(strict=self.strict,
                                          mint=None if mint is None else mint.new_recall_id)
        self._feedback = FeedbackStage(self._config, self._scorer, self._refit.curve)
        self._learner = Learner(self._config, self._caps, self._feedback, self._impressions,
                                self._evidence)

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
        version = self._evidence.version()
        request = self._request(query, namespace, k, now, track, config)
        seen = self._scorer.see(candidates, request)
        cfg = request.config
        evidence = self._evidence.read(
            self._caps, request.namespace, seen.feature_rows, seen.batch.ids,
            edges=cfg.learning.co_use is not None and cfg.weights.association > 0, version=version)
        scored = self._scorer.score(request, seen, evidence)
        if request.track and not evidence.flags and len(scored.top):
            recall_id, untracked = self._impressions.track(self.state, scored, version)
        else:
            recall_id, untracked = new_recall_id(), None
        return self._results(scored, recall_id, untracked)

    async def arerank(self, query: str, candidates: Sequence[CandidateLike], *,
                      namespace: str = "default", k: int = 10, now: Any = None, track: bool = True,
                      config: Config | None = None) -> Ranking:
        """Async :meth:`rerank`. On a state with an async client (Redis from a URL) its round
        trips are awaited on the event loop; on the others it runs in a worker thread."""
        twin = self._async_twin()
        if twin is None:
            return await asyncio.to_thread(self.rerank, query, candidates, namespace=namespace,
                                           k=k, now=now, track=track, config=config)
        request = self._request(query, namespace, k, now, track, config)
        seen = self._scorer.see(candidates, request)
        cfg = request.config
        evidence = await self._evidence.aread(
            twin, request.namespace, seen.feature_rows, seen.batch.ids,
            edges=cfg.learning.co_use is not None and cfg.weights.association > 0)
        scored = self._scorer.score(request, seen, evidence)
        if request.track and not evidence.flags and len(scored.top):
            recall_id, untracked = await self._impressions.atrack(twin, scored)
        else:
            recall_id, untracked = new_recall_id(), None
        return self._results(scored, recall_id, untracked)

    def _request(self, query: str, namespace: str, k: int, now: Any, track: bool,
                 config: Config | None) -> Request:
        if self._refit.next_poll <= time.monotonic():  # (never without continuous re-fits)
            self._adopt()
        query, namespace, k = check_query(query), check_namespace(namespace), check_k(k)
        cfg = self._call_config(config)
        when, explicit = resolve_now(now)
        return Request(query, namespace, k, when, explicit, track, cfg)

    def _results(self, scored: Scored, recall_id: str, untracked: str | None) -> Ranking:
        top_links = self._evidence.top_links(scored.evidence.links, scored.top_rows,
                                             scored.seen.generation)
        ranking = explain.ranking(scored, recall_id, top_links, untracked)
        if ranking.degraded:
            with self._degraded_lock:
                self._degraded += 1
        return ranking

    def _call_config(self, config: Config | None) -> Config:
        if config is None:
            return self._config
        if not isinstance(config, Config):
            raise InputTypeError(f"config: expected Config, got {type(config).__name__}")
        changed = [f for f in LEARNING_FIELDS
                   if attrgetter(f)(config) != attrgetter(f)(self._config)]
        if changed:
            raise ConfigError(f"config: a per-call config may change scoring fields only, not "
                              f"what feedback learns ({', '.join(changed)}); use "
                              f"Reranker.with_config(...) for another learning setup")
        return config

    # ---------------------------------------------------------------- weights

    def _adopt(self) -> None:
        """Rank with the weights stored in the state, if a newer version is there."""
        record = self._refit.poll()
        if record is not None:
            self._config = self._refit.adopt(self._config, record)
            self._feedback.examine(record.examination)

    def _fed(self, outcome: FeedbackOutcome) -> FeedbackOutcome:
        """After a feedback is stored: the re-fit it makes due, if any."""
        if self._refit.due(outcome):
            self.refit()
        return outcome

    def refit(self) -> FittedWeights | None:
        """Re-fit the weights from the state's impression log now and store them in the state
        (what ``Config.refit.every`` does after every that many feedbacks): the record that now
        applies, or None with too little data (or ``Refit(every=0)``). See docs/design.md,
        "Continuous re-fitting"."""
        record = self._refit.fit(self._config)
        if record is not None:
            self._config = self._refit.adopt(self._config, record)
            self._feedback.examine(record.examination)
        return record

    def _async_twin(self) -> AsyncStateBackend | None:
        """The state's async twin for the running loop, or None (a worker thread then). With
        co-use, only a twin that stores edges (an ``AsyncEdgeBackend``) serves."""
        provider = self._caps.async_provider
        twin = None if provider is None else provider.async_backend()
        if twin is not None and self._config.learning.co_use is not None \
                and not isinstance(twin, AsyncEdgeBackend):
            return None
        return twin

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
            InputTypeError: ``used`` is a bare string (write ``[id]``), or another wrong type.
            FeedbackError: unknown recall id, a recall of another namespace, an id that was not
                shown, a reused ``feedback_id`` with another shown list, or a contradiction of
                feedback already recorded.
        """
        ids, graded = self._feedback.check(used, labels)
        if recall_id is None:
            recall_id = self._learner.record_shown(namespace, query, shown, ids, graded, now,
                                                   feedback_id)
        elif feedback_id is not None:
            raise InputError("feedback_id: only with the explicit form (namespace=, query=, "
                             "shown=), not with a recall_id")
        asked = self._feedback.ask(recall_id, ids, graded, namespace, now)
        return self._fed(self._one(self._learner.learn([asked])))

    async def afeedback(self, recall_id: str | None = None, used: Used = (), *,
                        now: Any = None, namespace: str | None = None, query: str | None = None,
                        shown: Sequence[CandidateLike] | None = None,
                        feedback_id: str | None = None,
                        labels: Labels | None = None) -> FeedbackOutcome:
        """Async :meth:`feedback`. On a state with an async client (Redis from a URL) its round
        trips are awaited on the event loop; on the others it runs in a worker thread."""
        twin = self._async_twin()
        if twin is None:
            return await asyncio.to_thread(self.feedback, recall_id, used, now=now,
                                           namespace=namespace, query=query, shown=shown,
                                           feedback_id=feedback_id, labels=labels)
        ids, graded = self._feedback.check(used, labels)
        if recall_id is None:
            recall_id = await self._learner.arecord_shown(twin, namespace, query, shown, ids,
                                                          graded, now, feedback_id)
        elif feedback_id is not None:
            raise InputError("feedback_id: only with the explicit form (namespace=, query=, "
                             "shown=), not with a recall_id")
        asked = self._feedback.ask(recall_id, ids, graded, namespace, now)
        outcome = self._one(await self._learner.alearn(twin, asked))
        if self._refit.due(outcome):  # the fit itself in a worker thread: off the loop
            await asyncio.to_thread(self.refit)
        return outcome

    def feedback_many(self, requests: Iterable[tuple[str, Used] | tuple[str, Used, Labels]], *,
                      now: Any = None,
                      namespace: str | None = None) -> list[FeedbackOutcome | FeedbackError]:
        """Several ``feedback(recall_id, used)`` calls applied together: on SQLite in one
        transaction (one commit: a group commit), elsewhere one after the other. A request
        may carry a third entry, its ``labels`` (as :meth:`feedback`'s).

        Each feedback is still atomic and idempotent on its own, and learns what it would
        learn applied after the ones before it. Returns one entry per request, in order: its
        :class:`FeedbackOutcome`, or the :class:`FeedbackError` that kept it from being applied
        (the others are applied all the same). With ``namespace=`` every recall must be one of
        that namespace (as for :meth:`feedback`).
        """
        asks = []
        for recall_id, used, *rest in requests:
            ids, graded = self._feedback.check(used, rest[0] if rest else None)
            asks.append(self._feedback.ask(recall_id, ids, graded, namespace, now))
        return [r if isinstance(r, FeedbackError) else self._fed(r) for r in self._learner.learn(asks)]

    def mark_used(self, recall_id: str, ids: Used, *, now: Any = None,
                  namespace: str | None = None) -> FeedbackOutcome:
        """Record that these shown items were used; the rest of the impression stays open."""
        used, _ = self._feedback.check(ids, None, "ids")
        return self._one(self._learner.learn([self._feedback.ask(recall_id, used, {}, namespace, now,
                                                         rest=False)]))

    def mark_ignored(self, recall_id: str, ids: Used, *, now: Any = None,
                     namespace: str | None = None) -> FeedbackOutcome:
        """Record that these shown items were not used."""
        ignored = dict.fromkeys(self._feedback.check(ids, None, "ids")[0], IGNORED)
        return self._one(self._learner.learn([self._feedback.ask(recall_id, (), ignored, namespace, now,
                                                         rest=False)]))

    @staticmethod
    def _one(results: list[FeedbackOutcome | FeedbackError]) -> FeedbackOutcome:
        if isinstance(results[0], FeedbackError):
            raise results[0]
        return results[0]

    # ---------------------------------------------------------------- audit

    def links(self, namespace: str = "*", *, min_n: float = 0.0, level: float = 0.9) -> list[Link]:
        """Every learned link, strongest first: P(useful), evidence ``n`` and a ``level`` interval.

        ``namespace="*"`` lists the pooled global layer; a namespace lists its own links with
        the pooled prior it borrows. A namespace the state holds nothing of lists the pooled
        prior alone, exactly as any other new namespace would: whether a namespace exists is
        not something one tenant may learn from ``links``.
        """
        scope = None if namespace == "*" else check_namespace(namespace)
        return links_of(self.state, scope, self._config.learning.prior, min_n=min_n, level=level,
                        min_namespaces=self._config.learning.pooled_min_namespaces)

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
                :class:`PolicySet`) instead of ``config.retention.policy``.

        Returns:
            A :class:`~heaprank.model.retention.ForgetReport`: the count and ids, least
            retained first.

        Raises:
            StateError: ``candidates=None`` on a backend that cannot list its documents.
        """
        namespace = check_namespace(namespace)
        when, _ = resolve_now(now)
        chosen = ret.resolve_policy(self._config.retention.policy if policy is None else policy
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
        from .learning.guard import held_weights
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
            holds = held_weights(result.pooled.types, self._config)  # (in result.config too)
            self._config = result.config  # (scoring fields only: the stages keep theirs)
            self._refit.held |= set(holds)
            if result.moved and self._refit.store is not None:  # the other processes too
                self._refit.store_record(FittedWeights(
                    version=0, weights=result.config.weights, fitted_at=time.time(),
                    moved=True, reason="tune(apply=True)", impressions=result.pooled.impressions,
                    held=holds, types={q: c.to_dict() for q, c in result.pooled.types.items()},
                    examination=self._refit.curve))
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
        ``gain`` of the learned signals over relevance alone; None before any fit), and
        ``degraded_reranks``: this reranker's reranks that degraded (``Ranking.degraded``:
        ranked on the priors or not recorded, the state failing) since it was made.
        ``reject_weights``: the reject weight of an ignored item at ranks 1-10 in force, and
        with ``learning.reject_discount="fitted"`` whether the fitted curve is (``curve``) and from how
        many impressions with feedback."""
        self._adopt()
        record = self._refit.current
        return {**self.state.stats(),
                "degraded_reranks": self._degraded,
                "reject_weights": self._refit.describe_curve(self._config, self._feedback),
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
        """A reranker on the same state with some config fields changed; a mapping given for a
        group changes only the fields it names (:meth:`Config.with_changes`):
        ``rr.with_config(exploration={"rate": 0.5})``."""
        return self._clone(self.state, self._config.with_changes(**changes))

    def with_state(self, state: str | StateBackend) -> Reranker:
        """The same reranker (config, rules, classifier, feature cache) on another state: for
        example a read-only or leave-one-namespace-out view of this one's, for evaluation."""
        return self._clone(open_state(state, strict=self.strict), self._config)

    def _clone(self, state: StateBackend, config: Config) -> Reranker:
        clone = Reranker(state, config=config, rules=self.rules, question_classifier=self.classify,
                         strict=self.strict)
        if config.features.prefix_chars == self._config.features.prefix_chars:
            clone._assemble(self._space)  # the same texts featurise the same way: share the cache
        return clone
