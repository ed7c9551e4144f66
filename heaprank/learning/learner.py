"""A reranker's feedback from its checked arguments to the state and back, as plain calls.

:meth:`Learner.learn` is the one feedback path (``feedback``, ``feedback_many``,
``mark_used`` / ``mark_ignored`` and the explicit form all end in it): each ask is planned
against its recall's impression (the copy this process kept, else the state's), the counts its
EM credit needs are read (or taken from what its rerank read, while the state's version stands),
:class:`~heaprank.learning.feedback.FeedbackStage` works the updates out, and the state applies
them. An update the state found stale is planned again from what is stored then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._checks import MAX_NAMESPACE_CHARS, check_namespace
from ..config import Config
from ..errors import FeedbackError, InputError, InputTypeError, StateError
from ..model import co_use
from ..records import FeedbackOutcome, Impression, Update
from ..scoring.candidates import CandidateLike
from ..state.capabilities import AsyncStateBackend, Capabilities
from .evidence import EvidenceReader, async_edge_store, edge_store
from .feedback import Asked, EdgeView, FeedbackStage, Plan
from .impressions import ImpressionLog


class Learner:
    """The feedback I/O of one reranker: its state (with its capabilities), its feedback
    stage, its impression log and its evidence reader (for the state's version)."""

    def __init__(self, config: Config, caps: Capabilities, stage: FeedbackStage,
                 impressions: ImpressionLog, evidence: EvidenceReader) -> None:
        self._config = config
        self._caps = caps
        self._stage = stage
        self._impressions = impressions
        self._evidence = evidence

    def learn(self, asks: Sequence[Asked]) -> list[FeedbackOutcome | FeedbackError]:
        """Apply each ask: its outcome, or the FeedbackError that kept it from being applied."""
        rounds = Rounds(self._stage, asks)
        while pending := rounds.pending:
            plans = rounds.plan([self._impression(a.recall_id) for a in pending])
            for recall_id in rounds.applied(plans, self._apply(plans)):
                self._impressions.forget(recall_id)
        return rounds.results()

    async def alearn(self, twin: AsyncStateBackend,
                     ask: Asked) -> list[FeedbackOutcome | FeedbackError]:
        """:meth:`learn` of one feedback on the state's async twin."""
        rounds = Rounds(self._stage, [ask])
        while pending := rounds.pending:
            plans = rounds.plan([self._impressions.kept(a.recall_id)
                                 or await twin.get_impression(a.recall_id) for a in pending])
            counts = {ns: (features, await twin.read_links(ns, features))
                      for ns, features in self._stage.wanted(plans).items()}
            edges = await self._aedge_view(twin, plans[0]) if plans else None
            updates = self._stage.updates(plans, counts, None, edges)
            done = await twin.apply(updates) if updates else []
            for recall_id in rounds.applied(plans, self._recorded(updates, done)):
                self._impressions.forget(recall_id)
        return rounds.results()

    def _impression(self, recall_id: str) -> Impression | None:
        return self._impressions.kept(recall_id) or self._caps.state.get_impression(recall_id)

    def _apply(self, plans: Sequence[Plan]) -> list[bool]:
        """Work the plans' updates out and let the state apply them: all at once on a state
        with group commits, else (and with co-use) one at a time, each worked out from what the
        one before left."""
        if len(plans) > 1 and (self._config.learning.co_use is not None or not self._caps.group_commit):
            return [ok for plan in plans for ok in self._apply([plan])]
        if not plans:
            return []
        state = self._caps.state
        kept = self._impressions.kept_means(plans[0].asked.recall_id, self._evidence.version())
        counts = {ns: (features, state.read_links(ns, features))
                  for ns, features in self._stage.wanted(plans, kept).items()}
        updates = self._stage.updates(plans, counts, kept, self._edge_view(plans[0]))
        return self._recorded(updates, state.apply(updates))

    def _recorded(self, updates: Sequence[Update], done: Sequence[bool]) -> list[bool]:
        """Forget the kept copy of each recall an update changed (its verdicts moved on)."""
        for update, ok in zip(updates, done):
            if ok:
                self._impressions.forget(update.recall_id)
        return list(done)

    def _edge_view(self, plan: Plan) -> EdgeView | None:
        """What a co-use feedback reads of its namespace's edges (None: no co-use, or it forms
        no pair); a state without edges is refused before anything is applied."""
        if self._config.learning.co_use is None:
            return None
        store = edge_store(self._caps)
        pairs = self._stage.pairs(plan)
        if not pairs:
            return None
        ns = plan.impression.namespace
        return EdgeView(store.edge_state(ns, _docs(pairs)),
                        lambda: co_use.adjacency(store.list_edges(ns)))

    async def _aedge_view(self, twin: AsyncStateBackend, plan: Plan) -> EdgeView | None:
        """:meth:`_edge_view` on an async twin that stores edges: all of the namespace's are
        read first when the plan could take it past its cap (the rule reads them then)."""
        settings, pairs = self._config.learning.co_use, self._stage.pairs(plan)
        if settings is None or not pairs:
            return None
        store = async_edge_store(twin)
        ns = plan.impression.namespace
        edges = await store.edge_state(ns, _docs(pairs))
        everything = None
        if edges.total + len(pairs) > settings.max_edges:
            everything = co_use.adjacency(await store.list_edges(ns))
        return EdgeView(edges, lambda: everything if everything is not None else {})

    def record_shown(self, namespace: str | None, query: str | None,
                     shown: Sequence[CandidateLike] | None, used: tuple[str, ...],
                     labels: Mapping[str, int], now: Any, feedback_id: str | None) -> str:
        """Record the impression an explicit feedback (``namespace=, query=, shown=``) is
        about: its recall id (with ``feedback_id``, the one recorded under it before)."""
        imp = self._shown(namespace, query, shown, used, labels, now, feedback_id)
        held = self._impressions.put(self._caps.state, imp, feedback_id)
        if feedback_id is not None:
            _same_shown(feedback_id, imp, self._caps.state.get_impression(held))
        return held

    async def arecord_shown(self, twin: AsyncStateBackend, namespace: str | None,
                            query: str | None, shown: Sequence[CandidateLike] | None,
                            used: tuple[str, ...], labels: Mapping[str, int], now: Any,
                            feedback_id: str | None) -> str:
        """:meth:`record_shown` on the state's async twin."""
        imp = self._shown(namespace, query, shown, used, labels, now, feedback_id)
        held = await self._impressions.aput(twin, imp, feedback_id)
        if feedback_id is not None:
            _same_shown(feedback_id, imp, await twin.get_impression(held))
        return held

    def _shown(self, namespace: str | None, query: str | None,
               shown: Sequence[CandidateLike] | None, used: tuple[str, ...],
               labels: Mapping[str, int], now: Any, feedback_id: str | None) -> Impression:
        if namespace is None or query is None or shown is None:
            raise InputError("feedback: pass recall_id, or namespace=, query= and shown=")
        if feedback_id is not None:
            if not isinstance(feedback_id, str):
                raise InputTypeError(f"feedback_id: expected str, got {type(feedback_id).__name__}")
            if not feedback_id or len(feedback_id) > MAX_NAMESPACE_CHARS:
                raise InputError(f"feedback_id: must be 1 to {MAX_NAMESPACE_CHARS} characters")
        return self._stage.shown(namespace, query, shown, (*used, *labels), len(used), now,
                                 self._impressions.mint(check_namespace(namespace)))


def _docs(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """The documents of co-use pairs, sorted."""
    return sorted({d for pair in pairs for d in pair})


def _same_shown(feedback_id: str, imp: Impression, stored: Impression | None) -> None:
    """Refuse a ``feedback_id`` already used for another shown list in the namespace."""
    if stored is None or stored.ids != imp.ids:
        raise FeedbackError(f"feedback_id {feedback_id!r} was already used in this namespace "
                            f"for another shown list")


#: How many times a feedback is worked out again when the state found its update stale (a
#: concurrent feedback on the same recall, or on the namespace's co-use edges, came first).
STALE_ROUNDS = 8


class Rounds:
    """One feedback call's bookkeeping over its rounds. A round plans the pending
    :class:`Asked` against their impressions; the plans with something to record are applied.
    An ask for a recall already planned in the round waits for the next one (it then sees what
    the first recorded, as one feedback after another would), and an ask whose update the state
    found stale is planned again from what is stored then: at most :data:`STALE_ROUNDS` times
    in a row."""

    def __init__(self, stage: FeedbackStage, asks: Sequence[Asked]) -> None:
        self._stage = stage
        self._asks = list(asks)
        self._pending = list(range(len(asks)))
        self._results: dict[int, FeedbackOutcome | FeedbackError] = {}
        self._stale = 0
        self._planned: list[int] = []
        self._waiting: list[int] = []

    @property
    def pending(self) -> list[Asked]:
        """The asks this round plans."""
        if self._stale >= STALE_ROUNDS:
            raise StateError(f"feedback: {len(self._pending)} update(s) found stale "
                             f"{STALE_ROUNDS} times in a row (concurrent writers on the same "
                             f"recall); nothing of them was applied")
        recalls: set[str] = set()
        self._waiting = []
        ready: list[int] = []
        for i in self._pending:
            recall_id = self._asks[i].recall_id
            (self._waiting if recall_id in recalls else ready).append(i)
            recalls.add(recall_id)
        self._pending = ready
        return [self._asks[i] for i in ready]

    def plan(self, impressions: Sequence[Impression | None]) -> list[Plan]:
        """Plan :attr:`pending`'s asks on their impressions (in its order): the plans with
        something to record; the others are done (an error, or all recorded already)."""
        self._planned = []
        out = []
        for i, imp in zip(self._pending, impressions):
            try:
                plan = self._stage.plan(self._asks[i], imp)
            except FeedbackError as exc:
                self._results[i] = exc
                continue
            if plan.todo:
                self._planned.append(i)
                out.append(plan)
            else:
                self._results[i] = plan.outcome()
        self._pending = []
        return out

    def applied(self, plans: Sequence[Plan], done: Sequence[bool]) -> list[str]:
        """Record what the state applied of :meth:`plan`'s plans: the recall ids of the stale
        ones (planned again next round, with the asks that waited)."""
        stale = []
        for i, plan, ok in zip(self._planned, plans, done):
            if ok:
                self._results[i] = plan.outcome()
            else:
                self._pending.append(i)
                stale.append(plan.asked.recall_id)
        self._stale = self._stale + 1 if stale else 0
        self._pending = sorted(self._pending + self._waiting)
        return stale

    def results(self) -> list[FeedbackOutcome | FeedbackError]:
        """Each ask's outcome, or the FeedbackError that kept it from being applied, in order."""
        return [self._results[i] for i in range(len(self._asks))]
