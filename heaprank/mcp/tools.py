"""The MCP tools, thin over :class:`~heaprank.Reranker`: each checks which namespace its caller
may name, calls the reranker, and shapes what it returns as a :mod:`~heaprank.mcp.models`
result. Scoring, validation, EXPLAIN and learning are the reranker's; its errors (which name
the field) reach the agent as tool errors, and so does a state outage.

What is kept here: the recent :class:`~heaprank.Ranking` of each ``rerank`` (for ``why_not``
of a candidate that was not shown, which the state cannot answer: it keeps the shown ids only)
and the answer of each ``feedback`` sent with a ``feedback_id`` (a retry gets the same answer).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from .._checks import check_id
from ..adapters import relative_scores
from ..errors import HeapRankError, InputError
from ..records import LABELS, FeedbackOutcome
from ..reranker import Reranker
from ..scoring.candidates import Candidate
from ..scoring.results import Ranking
from .models import (
    CandidateIn,
    FeedbackOut,
    ForgetOut,
    LinkOut,
    LinksOut,
    RerankOut,
    Result,
    StatsOut,
    WhyNotOut,
)
from .recent import Recent
from .tenants import Caller

#: Links ``links`` lists at most (the strongest); ``total`` says how many there are.
MAX_LINKS = 200
#: ``feedback`` answers kept for a repeated ``feedback_id``.
KEEP_ANSWERS = 4_096

P = ParamSpec("P")
T = TypeVar("T")

#: What a ``feedback_id`` answer is kept with: the recall's namespace and what was asked.
_Asked = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]


def reported(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``method`` with heaprank's errors turned into tool errors (their message unchanged):
    the agent reads what was wrong and the server goes on."""
    @functools.wraps(method)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except HeapRankError as exc:
            raise ToolError(str(exc)) from None
    return run


class Tools:
    """The tools of one server over one reranker.

    Args:
        reranker: Every call goes through it (its state is shared with any other process).
        keep_rankings: How many recent rankings ``why_not`` can explain.
    """

    def __init__(self, reranker: Reranker, *, keep_rankings: int = 512) -> None:
        self.reranker = reranker
        self.rankings: Recent[str, Ranking] = Recent(keep_rankings)
        self._answers: Recent[tuple[str, str], tuple[str, _Asked, FeedbackOut]] = Recent(
            KEEP_ANSWERS)

    @reported
    async def rerank(self, caller: Caller, query: str, candidates: Sequence[CandidateIn],
                     namespace: str | None = None, k: int = 10) -> RerankOut:
        """Re-rank ``candidates`` for ``query`` in the caller's namespace."""
        ns = caller.scope(namespace)
        given = [Candidate(c.id, c.text, c.score, c.metadata or {}) for c in candidates]
        ranking = await self.reranker.arerank(query, given, namespace=ns, k=k)
        self.rankings.put(ranking.recall_id, ranking)
        first = {c.id: i for i, c in enumerate(given, 1)}
        results = [Result(id=r.id, rank=r.rank, score=s, first_stage_rank=first[r.id],
                          explain=r.explain(), signals=dict(r.signals))
                   for r, s in zip(ranking, relative_scores([r.score for r in ranking]))]
        return RerankOut(recall_id=ranking.recall_id, namespace=ns, results=results)

    @reported
    async def feedback(self, caller: Caller, recall_id: str, used: Sequence[str] | None = None,
                       labels: Mapping[str, str] | None = None,
                       feedback_id: str | None = None) -> FeedbackOut:
        """Record which shown items the answer used (the others: ignored, or as labelled)."""
        ns = await self._namespace_of(caller, check_id(recall_id, "recall_id"))
        asked: _Asked = (tuple(sorted(set(used or ()))), tuple(sorted((labels or {}).items())))
        if feedback_id is not None:
            seen = self._answers.get((recall_id, check_id(feedback_id, "feedback_id")))
            if seen is not None:
                if seen[1] != asked:
                    raise InputError(f"feedback_id {feedback_id!r}: already used for recall "
                                     f"{recall_id!r} with other used or labels")
                return seen[2]
        outcome = await self.reranker.afeedback(recall_id, used or (), namespace=ns,
                                                labels=labels)
        out = _recorded(outcome, used or (), labels or {}, feedback_id)
        if feedback_id is not None:
            self._answers.put((recall_id, feedback_id), (ns, asked, out))
        return out

    async def _namespace_of(self, caller: Caller, recall_id: str) -> str:
        """The namespace feedback on ``recall_id`` is given in: the recall's own if the caller
        may name it, else the caller's default (the core then answers "unknown recall", as
        for an id that was never recorded)."""
        ranking = self.rankings.get(recall_id)
        if ranking is not None:
            ns: str | None = ranking.namespace
        else:  # a recall of another process sharing the state
            imp = await asyncio.to_thread(self.reranker.state.get_impression, recall_id)
            ns = None if imp is None else imp.namespace
        return ns if ns is not None and caller.may(ns) else caller.default

    @reported
    async def why_not(self, caller: Caller, recall_id: str, id: str) -> WhyNotOut:
        """Why candidate ``id`` of a recent ranking was not returned."""
        ranking = self.rankings.get(recall_id)
        if ranking is None or not caller.may(ranking.namespace):
            raise InputError(f"recall_id {recall_id!r}: not among this server's "
                             f"{self.rankings.size} most recent rankings (why_not needs the "
                             "ranking itself; the state keeps only the shown ids)")
        try:
            why = ranking.why_not(id)
        except (KeyError, ValueError) as exc:
            raise InputError(f"id: {exc.args[0]}") from None
        return WhyNotOut(id=why.id, rank=why.rank, score=why.score, kth_score=why.kth_score,
                         factor=why.factor, message=why.message)

    @reported
    async def links(self, caller: Caller, namespace: str | None = None,
                    min_n: float = 0.0) -> LinksOut:
        """The learned links of a namespace (``"*"``: the pooled layer), strongest first."""
        ns = "*" if namespace == "*" else caller.scope(namespace)
        rows = await asyncio.to_thread(self.reranker.links, ns, min_n=min_n)
        return LinksOut(namespace=ns, total=len(rows), links=[
            LinkOut(feature=r.feature, p=r.p, n=r.n, low=r.low, high=r.high)
            for r in rows[:MAX_LINKS]])

    @reported
    async def stats(self, caller: Caller) -> StatsOut:
        """The weights in use; for the owner or an operator also the state's counts and the
        record of the weights' last fit (both count every namespace's impressions: a tenant
        watching them would learn how busy the others are)."""
        stats = await asyncio.to_thread(self.reranker.stats)
        weights, fitted = stats.pop("weights"), stats.pop("weights_fitted")
        if not caller.operator:
            return StatsOut(counts=None, weights=weights, weights_fitted=None)
        return StatsOut(counts=stats, weights=weights, weights_fitted=fitted)

    @reported
    async def forget_namespace(self, caller: Caller, namespace: str) -> ForgetOut:
        """Drop every record of ``namespace``; this server's memories of it go too."""
        ns = caller.scope(namespace)
        await asyncio.to_thread(self.reranker.forget_namespace, ns)
        self.rankings.drop(lambda _, ranking: ranking.namespace == ns)
        self._answers.drop(lambda _, answer: answer[0] == ns)
        return ForgetOut(namespace=ns, forgotten=True)


def _recorded(outcome: FeedbackOutcome, used: Sequence[str], labels: Mapping[str, str],
              feedback_id: str | None) -> FeedbackOut:
    """The answer to a feedback: its items counted per verdict (those it labels as labelled,
    ``used`` as used, every other shown item ignored, as the reranker records them)."""
    listed = set(used)
    counts = dict.fromkeys(LABELS, 0)
    for item in (*outcome.applied, *outcome.already_recorded):
        counts[labels.get(item) or ("used" if item in listed else "ignored")] += 1
    return FeedbackOut(recall_id=outcome.recall_id, recorded=counts,
                       applied=len(outcome.applied),
                       already_recorded=len(outcome.already_recorded), feedback_id=feedback_id)
