"""``HeapRankFeedbackHandler``: closes the learning loop from LangChain callbacks.

It links each heaprank ranking to the answer of the same trace (the root run), decides which
shown documents the answer used, and calls the core's ``feedback`` with that ranking's recall id.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from heaprank import FeedbackError, Reranker
from heaprank.adapters import (
    DEFAULT_USAGE,
    Detector,
    FeedbackWriter,
    Usage,
    nothing_to_cite,
    open_engine,
    state_key,
    surely_different,
    usage_detector,
)
from heaprank.learning.attribution import Shown, detect
from heaprank.records import FeedbackOutcome
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from ._convert import logger
from .reranker import RANKING_EVENT, HeapRankOptions

#: Key of a root output dict in which the app names the ids it used, e.g. ``{"heaprank_used": [...]}``.
USED_OUTPUT_KEY = "heaprank_used"
#: What the warning of a skipped answer says to change.
SHOW_IDS = ("Show the model each document's id and ask it to cite them, e.g. "
            "format_docs = lambda docs: \"\\n\".join(f\"[{d.metadata['heaprank_id']}] "
            "{d.page_content}\" for d in docs); or pass usage=\"citations+coverage\" (the "
            "answer's words found in a document when nothing is cited) or usage=\"explicit\" "
            "(you call handler.feedback).")


@dataclass(frozen=True, slots=True)
class FeedbackReport:
    """What the handler reported for one ranking of one trace."""

    run_id: UUID  # the trace's root run
    recall_id: str
    namespace: str
    shown: tuple[str, ...]
    used: tuple[str, ...]
    source: str  # the usage name, "app" (root output) or "explicit" (handler.feedback)
    #: The shown ids the state holds this feedback's verdict for, used or ignored (the core's
    #: outcome, in the ranking's namespace); a retry lists them as already recorded.
    recorded: tuple[str, ...] = ()


@dataclass
class _Trace:
    rankings: list[dict[str, Any]]
    answer: str | None = None
    prompts: list[str] = field(default_factory=list)  # what the trace's models were shown


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

    - ``"citations+coverage"`` (default): ``[doc-id]`` or ``[1]`` (position shown) in the answer;
      else the shown documents that hold the largest share (at least ``overlap_threshold``) of
      the answer's content words and numbers, the question's own words left out; else the
      handler *abstains*: no feedback is recorded (counted in :attr:`abstained`, a DEBUG line),
      never "nothing was used";
    - ``"citations"``: citations only. An answer citing nothing after prompts that showed no id
      to cite (the page text alone) is skipped, not recorded as "nothing was used": counted in
      :attr:`skipped` and warned about once; after prompts that showed ids, it is recorded as
      "nothing used";
    - ``"coverage"``: the answer's coverage alone; ``"overlap"``: the older opt-in heuristic (a
      document's words in the answer); ``"citations+overlap"``: citations, else overlap;
    - ``"explicit"``: nothing automatic; the app calls :meth:`feedback` with the root run id
      (set it with ``config={"run_id": ...}``);
    - a callable ``(answer, shown) -> used ids``, or ``None`` to abstain (it is also given
      ``question=`` when it takes that keyword).

    A root output dict with ``"heaprank_used": [ids]`` always wins: the app said what it used.
    In ``invoke`` the feedback is written before the call returns; in ``ainvoke`` with the core's
    ``afeedback`` in a task on the event loop (``await handler.aflush()`` waits for it). A
    feedback that cannot be recorded is logged at WARNING with its reason and counted in
    :attr:`failed`; rankings of another state than the handler's are left to their own handler
    (the reranker warns once, :class:`heaprank.adapters.StateMismatchWarning`, when there is none).

    Args:
        state: Where the feedback goes: the :class:`HeapRankRetriever` or
            :class:`HeapRankReranker` whose rankings it reports (best: same state by
            construction), a :class:`heaprank.Reranker`, or a state URL.
        usage: How "used" is decided (see above).
        overlap_threshold: The bar of the word heuristics: the share of the answer's content
            words a document must hold (coverage), or of a document's the answer must hold
            (overlap).
        keep: How many finished traces to remember for later :meth:`feedback` by run id.

    Raises:
        TypeError: ``state`` is none of these.
    """

    run_inline = True  # in ainvoke, on the event loop, in order (the work is small)

    def __init__(self, state: str | Reranker | HeapRankOptions, *,
                 usage: Usage | Detector = DEFAULT_USAGE, overlap_threshold: float = 0.5,
                 keep: int = 1024) -> None:
        engine = state.engine if isinstance(state, HeapRankOptions) else \
            open_engine(state, owner="HeapRankFeedbackHandler.state")
        self.engine: Reranker = engine
        self.heaprank_state_key = state_key(engine)
        self.detector, self.usage_name = usage_detector(usage, overlap_threshold)
        self.keep = keep
        self.writer = FeedbackWriter(engine, logger)
        self._lock = threading.Lock()
        self._root_of: dict[UUID, UUID] = {}
        self._members: dict[UUID, list[UUID]] = {}
        self._open: dict[UUID, _Trace] = {}
        self._done: OrderedDict[UUID, _Trace] = OrderedDict()
        self._reports: list[FeedbackReport] = []

    @property
    def reports(self) -> list[FeedbackReport]:
        """The last ``keep`` reports, oldest first (each names its trace's root ``run_id``)."""
        with self._lock:
            return list(self._reports)

    @property
    def failed(self) -> int:
        """How many feedbacks could not be recorded (each logged at WARNING with its reason)."""
        return self.writer.failed

    @property
    def skipped(self) -> int:
        """How many answers were not recorded because their prompts showed no id to cite."""
        return self.writer.skipped

    @property
    def abstained(self) -> int:
        """How many answers were not recorded because ``usage`` could not tell what they used."""
        return self.writer.abstained

    async def aflush(self) -> None:
        """Wait for the feedback written from this event loop (``ainvoke``) to be recorded."""
        await self.writer.aflush()

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
        self._shown_to_model(run_id, [p for p in prompts if isinstance(p, str)])

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id)
        texts = [_text(m) for batch in messages for m in batch]
        self._shown_to_model(run_id, [t for t in texts if t])

    def _shown_to_model(self, run_id: UUID, texts: list[str]) -> None:
        with self._lock:
            trace = self._trace_of(run_id)
            if trace is not None:
                trace.prompts.extend(texts)

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id)

    # ------------------------------------------------------------ what the trace saw

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name != RANKING_EVENT or surely_different(str(data.get("state")), self.heaprank_state_key):
            return  # another state's ranking belongs to its own handler
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
        try:
            self._feed_back(run_id, trace, outputs)
        except Exception as exc:  # LangChain would log one line a run and drop it: count it
            self.writer.fail(trace.rankings[0]["recall_id"], exc)

    def _feed_back(self, run_id: UUID, trace: _Trace, outputs: Any) -> None:
        """Write the feedback of a finished trace: the ids the app named, else the detector's.

        Raises:
            FeedbackError: the app named an id no ranking of the trace showed (nothing written).
            Exception: whatever a ``usage`` callable raises.
        """
        app_used = outputs.get(USED_OUTPUT_KEY) if isinstance(outputs, dict) else None
        if app_used is not None:
            for ranking, used in self._plan(run_id, trace, [str(x) for x in app_used]):
                self._write(run_id, ranking, used, "app")
        elif self.detector is not None and trace.answer is not None:
            prompts = "\n".join(trace.prompts)
            for ranking in trace.rankings:
                shown = _shown(ranking)
                found = detect(self.detector, trace.answer, shown, question=ranking["query"])
                if found is None:
                    self.writer.abstain(ranking["recall_id"], self.usage_name)
                elif nothing_to_cite(self.usage_name, found, prompts, shown, ranking["query"]):
                    self.writer.skip(ranking["recall_id"], SHOW_IDS)
                else:
                    self._write(run_id, ranking, found, self.usage_name)

    def _plan(self, run_id: UUID, trace: _Trace,
              used: Iterable[str]) -> list[tuple[dict[str, Any], list[str]]]:
        """Each ranking of ``trace`` with the ids of ``used`` it showed (names resolved).

        Raises:
            FeedbackError: an id that no ranking of the trace showed (before any write).
        """
        return [(ranking, mine) for ranking, mine, _ in self._graded(run_id, trace, used, None)]

    def _graded(self, run_id: UUID, trace: _Trace, used: Iterable[str],
                labels: Mapping[str, str] | None
                ) -> list[tuple[dict[str, Any], list[str], dict[str, str]]]:
        """:meth:`_plan` with each ranking's share of ``labels`` too (names resolved)."""
        wanted, graded = list(used), dict(labels or {})
        plan: list[tuple[Any, list[str], dict[str, str]]] = []
        claimed: set[str] = set()
        for ranking in trace.rankings:
            names = {name: s.id for s in _shown(ranking) for name in (s.id, *s.aliases)}
            plan.append((ranking, [names[u] for u in wanted if u in names],
                         {names[u]: label for u, label in graded.items() if u in names}))
            claimed.update(u for u in (*wanted, *graded) if u in names)
        unknown = [u for u in wanted if u not in claimed]
        if unknown:
            raise FeedbackError(f"used: {unknown} were not shown in run {run_id}")
        unknown = [u for u in graded if u not in claimed]
        if unknown:
            raise FeedbackError(f"labels: {unknown} were not shown in run {run_id}")
        return plan

    def _report(self, run_id: UUID, ranking: dict[str, Any], used: Sequence[str],
                source: str, outcome: FeedbackOutcome) -> FeedbackReport:
        report = FeedbackReport(run_id=run_id, recall_id=ranking["recall_id"],
                                namespace=ranking["namespace"],
                                shown=tuple(s["id"] for s in ranking["shown"]),
                                used=tuple(used), source=source,
                                recorded=outcome.applied + outcome.already_recorded)
        logger.debug("heaprank feedback: %s", report)
        with self._lock:
            self._reports.append(report)
            del self._reports[:-self.keep]
        return report

    def _write(self, run_id: UUID, ranking: dict[str, Any], used: Sequence[str], source: str) -> None:
        self.writer.write(ranking["recall_id"], used, namespace=ranking["namespace"],
                          done=lambda outcome: self._report(run_id, ranking, used, source, outcome))

    def _finished(self, run_id: UUID | str) -> tuple[UUID, _Trace]:
        try:
            root = run_id if isinstance(run_id, UUID) else UUID(str(run_id))
        except ValueError:
            raise FeedbackError(f"run_id {run_id!r}: not a run id (the trace's root run id, a "
                                "UUID; set it with config={'run_id': ...})") from None
        with self._lock:
            trace = self._done.get(root)
        if trace is None:
            raise FeedbackError(f"run_id {root}: no finished trace with a heaprank ranking "
                                f"(unknown, still running, or older than the last {self.keep})")
        return root, trace

    def feedback(self, run_id: UUID | str, used: Iterable[str] = (), *, now: Any = None,
                 labels: Mapping[str, str] | None = None) -> list[FeedbackReport]:
        """Report what the answer of trace ``run_id`` (its root run id) used, e.g. with
        ``usage="explicit"``. Ids may be heaprank ids or ``Document.id`` values. ``labels``
        grades shown documents one by one, as the core's ``feedback(labels=...)``:
        ``{id: "used" | "ignored" | "outdated" | "wrong"}``.

        Raises:
            FeedbackError: unknown or forgotten run id, or an id that was not shown (nothing is
                written then); the core's errors as they come (this is the app's own call).
        """
        root, trace = self._finished(run_id)
        out = []
        for ranking, mine, graded in self._graded(root, trace, used, labels):
            outcome = self.engine.feedback(ranking["recall_id"], used=mine, now=now,
                                           namespace=ranking["namespace"], labels=graded or None)
            out.append(self._report(root, ranking, mine, "explicit", outcome))
        return out

    async def afeedback(self, run_id: UUID | str, used: Iterable[str] = (), *,
                        now: Any = None,
                        labels: Mapping[str, str] | None = None) -> list[FeedbackReport]:
        """Async :meth:`feedback` (the core's ``afeedback``)."""
        root, trace = self._finished(run_id)
        out = []
        for ranking, mine, graded in self._graded(root, trace, used, labels):
            outcome = await self.engine.afeedback(ranking["recall_id"], used=mine, now=now,
                                                  namespace=ranking["namespace"],
                                                  labels=graded or None)
            out.append(self._report(root, ranking, mine, "explicit", outcome))
        return out


def _shown(ranking: dict[str, Any]) -> list[Shown]:
    return [Shown(s["id"], tuple(s["aliases"]), s["text"]) for s in ranking["shown"]]
