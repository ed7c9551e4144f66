"""``HeapRankFeedbackHandler``: closes the learning loop from LangChain callbacks.

It links each heaprank ranking to the answer of the same trace (the root run), decides which
shown documents the answer used, and calls the core's ``feedback`` with that ranking's recall id.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from heaprank import FeedbackError, Reranker
from heaprank.learning.attribution import Shown, UsageDetector, citations_or_overlap, cited, overlapping
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from .reranker import RANKING_EVENT, HeapRankReranker

logger = logging.getLogger("langchain_heaprank")

Usage = Literal["citations", "overlap", "citations+overlap", "explicit"]
#: Key of a root output dict in which the app names the ids it used, e.g. ``{"heaprank_used": [...]}``.
USED_OUTPUT_KEY = "heaprank_used"


@dataclass(frozen=True, slots=True)
class FeedbackReport:
    """What the handler reported for one ranking of one trace."""

    run_id: UUID  # the trace's root run
    recall_id: str
    namespace: str
    shown: tuple[str, ...]
    used: tuple[str, ...]
    source: str  # "citations", "overlap", "app" (root output) or "explicit" (handler.feedback)


@dataclass
class _Trace:
    rankings: list[dict[str, Any]]
    answer: str | None = None


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return value.text if isinstance(value.text, str) else str(value.content)
    return None


class HeapRankFeedbackHandler(BaseCallbackHandler):
    """Report which reranked documents each answer used, from the trace's callbacks.

    Pass it in the run config (``chain.invoke(q, config={"callbacks": [handler]})``). When the
    trace's root run ends it takes every heaprank ranking of the trace (the reranked retrieval, not
    the raw inner one), the trace's answer (the last LLM output, else the root output if text),
    and reports ``used`` as decided by ``usage``:

    - ``"citations"`` (default): ``[doc-id]`` or ``[1]`` (position shown) in the answer;
    - ``"overlap"``: the opt-in word-overlap heuristic; ``"citations+overlap"``: citations when
      there are any, else overlap;
    - ``"explicit"``: nothing automatic; the app calls :meth:`feedback` with the root run id
      (set it with ``config={"run_id": ...}``);
    - a callable ``(answer, shown) -> used ids``.

    A root output dict with ``"heaprank_used": [ids]`` always wins: the app said what it used.
    Callbacks may arrive on worker threads (parallel branches); shared state is locked.

    Args:
        reranker: The heaprank :class:`~heaprank.Reranker` (or :class:`HeapRankReranker`) whose
            state records the feedback.
        usage: How "used" is decided (see above).
        overlap_threshold: Share of a document's content words the answer must contain.
        keep: How many finished traces to remember for later :meth:`feedback` by run id.
    """

    run_inline = True  # in ainvoke, keep callbacks in order on the event loop (the work is small)

    def __init__(self, reranker: Reranker | HeapRankReranker, *,
                 usage: Usage | UsageDetector = "citations", overlap_threshold: float = 0.5,
                 keep: int = 1024) -> None:
        self.reranker = reranker.reranker if isinstance(reranker, HeapRankReranker) else reranker
        self.detector = self._detector(usage, overlap_threshold)
        self.usage_name = usage if isinstance(usage, str) else getattr(usage, "__name__", "custom")
        self.keep = keep
        self._lock = threading.Lock()
        self._root_of: dict[UUID, UUID] = {}
        self._members: dict[UUID, list[UUID]] = {}
        self._open: dict[UUID, _Trace] = {}
        self._done: OrderedDict[UUID, _Trace] = OrderedDict()
        self.reports: OrderedDict[UUID, list[FeedbackReport]] = OrderedDict()

    @staticmethod
    def _detector(usage: Usage | UsageDetector, threshold: float) -> UsageDetector | None:
        if callable(usage):
            return usage
        named: dict[str, UsageDetector | None] = {
            "citations": cited,
            "overlap": lambda answer, shown: overlapping(answer, shown, threshold=threshold),
            "citations+overlap": citations_or_overlap(threshold),
            "explicit": None,
        }
        if usage not in named:
            raise ValueError(f"usage: expected one of {sorted(named)} or a callable, got {usage!r}")
        return named[usage]

    # ------------------------------------------------------------ run tree

    def _start(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        with self._lock:
            root = run_id if parent_run_id is None else self._root_of.get(parent_run_id, parent_run_id)
            self._root_of[run_id] = root
            self._members.setdefault(root, []).append(run_id)
            if root == run_id:
                self._open[root] = _Trace(rankings=[])

    def _trace_of(self, run_id: UUID) -> _Trace | None:
        root = self._root_of.get(run_id)
        return None if root is None else self._open.get(root)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id)

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID,
                           parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: UUID,
                     parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id)

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id)

    # ------------------------------------------------------------ what the trace saw

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name != RANKING_EVENT:
            return
        with self._lock:
            trace = self._trace_of(run_id)
            if trace is not None:
                trace.rankings.append(data)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        text = response.generations[0][0].text if response.generations and response.generations[0] \
            else None
        with self._lock:
            trace = self._trace_of(run_id)
            if trace is not None and text:
                trace.answer = text
        self._end(run_id, None)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, outputs)

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, None)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, None, failed=True)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, None, failed=True)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, None, failed=True)

    # ------------------------------------------------------------ reporting

    def _end(self, run_id: UUID, outputs: Any, *, failed: bool = False) -> None:
        with self._lock:
            if self._root_of.get(run_id) != run_id:
                return  # not a root: the trace goes on
            for member in self._members.pop(run_id, []):
                self._root_of.pop(member, None)
            trace = self._open.pop(run_id, None)
            if trace is None or failed or not trace.rankings:
                return  # a failed answer teaches nothing: no feedback
            if trace.answer is None:
                trace.answer = _text(outputs)
            self._done[run_id] = trace
            while len(self._done) > self.keep:
                self._done.popitem(last=False)
        app_used = outputs.get(USED_OUTPUT_KEY) if isinstance(outputs, dict) else None
        if app_used is not None:
            self._report(run_id, trace, [str(x) for x in app_used], "app")
        elif self.detector is not None and trace.answer is not None:
            for ranking in trace.rankings:
                shown = [Shown(s["id"], tuple(s["aliases"]), s["text"]) for s in ranking["shown"]]
                used = self.detector(trace.answer, shown)
                self._apply(run_id, ranking, used, self.usage_name)

    def _report(self, run_id: UUID, trace: _Trace, used: Iterable[str], source: str,
                now: Any = None) -> None:
        wanted = list(used)
        per_ranking = []
        claimed: set[str] = set()
        for ranking in trace.rankings:
            names = {}
            for s in ranking["shown"]:
                names[s["id"]] = s["id"]
                names.update({alias: s["id"] for alias in s["aliases"]})
            per_ranking.append((ranking, [names[u] for u in wanted if u in names]))
            claimed.update(u for u in wanted if u in names)
        unknown = [u for u in wanted if u not in claimed]
        if unknown:  # checked before any write: all of it applies, or none
            raise FeedbackError(f"used: {unknown} were not shown in run {run_id}")
        for ranking, mine in per_ranking:
            self._apply(run_id, ranking, mine, source, now)

    def _apply(self, run_id: UUID, ranking: dict[str, Any], used: Sequence[str], source: str,
               now: Any = None) -> None:
        self.reranker.feedback(ranking["recall_id"], used=list(used), now=now)
        report = FeedbackReport(run_id=run_id, recall_id=ranking["recall_id"],
                                namespace=ranking["namespace"],
                                shown=tuple(s["id"] for s in ranking["shown"]),
                                used=tuple(used), source=source)
        logger.debug("heaprank feedback: %s", report)
        with self._lock:
            self.reports.setdefault(run_id, []).append(report)
            while len(self.reports) > self.keep:
                self.reports.popitem(last=False)

    def feedback(self, run_id: UUID | str, used: Iterable[str], *, now: Any = None) -> list[FeedbackReport]:
        """Report what the answer of trace ``run_id`` (its root run id) used, e.g. with
        ``usage="explicit"``. Ids may be heaprank ids or ``Document.id`` values.

        Raises:
            FeedbackError: unknown or forgotten run id, or an id that was not shown.
        """
        root = run_id if isinstance(run_id, UUID) else UUID(str(run_id))
        with self._lock:
            trace = self._done.get(root)
        if trace is None:
            raise FeedbackError(f"run_id {root}: no finished trace with a heaprank ranking "
                                f"(unknown, still running, or older than the last {self.keep})")
        self._report(root, trace, used, "explicit", now)
        return self.reports.get(root, [])
