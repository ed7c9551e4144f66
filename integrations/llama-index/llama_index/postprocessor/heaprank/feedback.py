"""``HeapRankFeedbackHandler``: closes the learning loop from LlamaIndex instrumentation.

A span handler on the root dispatcher sees every span's result. A query engine's ``Response``
and a chat engine's ``AgentChatResponse`` carry ``source_nodes`` (the postprocessed nodes, i.e.
what the LLM saw) and the answer text; the nodes carry heaprank's recall id, so no span linking is
needed. A streaming response is reported when its token stream is drained.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from heaprank import FeedbackError, Reranker
from heaprank.adapters import (
    DEFAULT_USAGE,
    Detector,
    FeedbackWriter,
    StateMismatchWarning,
    Usage,
    nothing_to_cite,
    open_engine,
    state_key,
    surely_different,
    usage_detector,
    warn_at_caller,
)
from heaprank.learning.attribution import Shown, detect
from heaprank.records import FeedbackOutcome
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.chat_engine.types import StreamingAgentChatResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.schema import MetadataMode, NodeWithScore

from ._convert import logger
from .base import ID_KEY, NAMESPACE_KEY, RECALL_ID_KEY, STATE_KEY, HeapRankPostprocessor

#: What the warning of a skipped answer says to change.
SHOW_IDS = ("Show the model each node's number and ask it to cite them: "
            "HeapRankPostprocessor(citations=True) with "
            "index.as_query_engine(..., text_qa_template=citation_qa_template()), or "
            "CitationQueryEngine; or pass usage=\"citations+coverage\" (the answer's words "
            "found in a node when nothing is cited) or usage=\"explicit\" (you call handler.feedback).")


@dataclass(frozen=True, slots=True)
class FeedbackReport:
    """What the handler reported for one ranking."""

    recall_id: str
    shown: tuple[str, ...]
    used: tuple[str, ...]
    source: str  # the usage mode, or "explicit"
    #: The shown ids the state holds this feedback's verdict for, used or ignored (the core's
    #: outcome, in the ranking's namespace); a retry lists them as already recorded.
    recorded: tuple[str, ...] = ()
    namespace: str | None = None  # the ranking's (None: a node of a version that kept none)


@dataclass(frozen=True, slots=True)
class _Ranking:
    recall_id: str
    state: str  # the state key of the postprocessor that ranked
    shown: tuple[Shown, ...]
    namespace: str | None  # the namespace it was ranked in, which its feedback names
    seen: str = ""  # the nodes as the model saw them (their LLM-mode content)


def _rankings(source_nodes: Sequence[NodeWithScore]) -> list[_Ranking]:
    """Shown nodes grouped by recall id, in the order the LLM saw them."""
    grouped: dict[str, tuple[str, str | None, list[Shown], list[str]]] = {}
    for nws in source_nodes:
        meta = nws.node.metadata
        recall_id, doc_id = meta.get(RECALL_ID_KEY), meta.get(ID_KEY)
        if isinstance(recall_id, str) and isinstance(doc_id, str):
            aliases = tuple(a for a in (nws.node.node_id, nws.node.ref_doc_id) if a and a != doc_id)
            shown = Shown(doc_id, aliases, nws.node.get_content(MetadataMode.NONE))
            namespace = meta.get(NAMESPACE_KEY)
            group = grouped.setdefault(recall_id, (str(meta.get(STATE_KEY)),
                                                   namespace if isinstance(namespace, str) else None,
                                                   [], []))
            group[2].append(shown)
            group[3].append(nws.node.get_content(MetadataMode.LLM))
    return [_Ranking(r, key, tuple(shown), namespace, "\n".join(seen))
            for r, (key, namespace, shown, seen) in grouped.items()]


class HeapRankFeedbackHandler(BaseSpanHandler[SimpleSpan]):
    """Report which reranked nodes each response used, from LlamaIndex instrumentation.

    ``handler.install()`` registers it on the root dispatcher (idempotent; ``uninstall()`` removes
    it). ``usage`` decides "used": ``"citations+coverage"`` (default: ``[node-id]`` or ``[1]``,
    the position among the source nodes; else the nodes that hold the largest share, at least
    ``overlap_threshold``, of the answer's content words and numbers; else it *abstains*: no
    feedback is recorded, counted in :attr:`abstained` with a DEBUG line), ``"citations"``,
    ``"coverage"``, ``"overlap"`` (the older opt-in word overlap), ``"citations+overlap"``, a
    callable ``(answer, shown) -> ids`` (``None``: abstain), or ``"explicit"``: nothing
    automatic, the app calls :meth:`feedback` with the response. Each ranking is reported
    once. With ``"citations"``, an answer citing nothing when the nodes showed the model no id
    to cite (the default prompts: see :func:`citation_qa_template`) is skipped, not recorded as
    "nothing was used": counted in :attr:`skipped` and warned about once.

    Synchronous queries write their feedback before returning; async ones (``aquery``,
    ``achat``) with the core's ``afeedback`` in a task (``await handler.aflush()`` waits for
    it). A feedback that cannot be recorded is logged at WARNING with its reason and counted
    in :attr:`failed`. Rankings of a state no installed handler holds are reported once with a
    :class:`heaprank.adapters.StateMismatchWarning`.

    Args:
        state: The :class:`HeapRankPostprocessor` whose rankings it reports (same state by
            construction), a :class:`heaprank.Reranker`, or a state URL.

    Raises:
        TypeError: ``state`` is none of these.
    """

    _engine: Reranker = PrivateAttr()
    _key: str = PrivateAttr()
    _writer: FeedbackWriter = PrivateAttr()
    _detector: Detector | None = PrivateAttr(default=None)
    _usage_name: str = PrivateAttr(default=DEFAULT_USAGE)
    _keep: int = PrivateAttr(default=4096)
    _seen: OrderedDict[str, None] = PrivateAttr(default_factory=OrderedDict)
    _warned: set[str] = PrivateAttr(default_factory=set)
    _guard: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _reports: list[FeedbackReport] = PrivateAttr(default_factory=list)

    def __init__(self, state: str | Reranker | HeapRankPostprocessor, *,
                 usage: Usage | Detector = DEFAULT_USAGE, overlap_threshold: float = 0.5,
                 keep: int = 4096) -> None:
        super().__init__()
        self._engine = state.engine if isinstance(state, HeapRankPostprocessor) else \
            open_engine(state, owner="HeapRankFeedbackHandler.state")
        self._key = state_key(self._engine)
        self._writer = FeedbackWriter(self._engine, logger)
        self._detector, self._usage_name = usage_detector(usage, overlap_threshold)
        self._keep = keep

    @classmethod
    def class_name(cls) -> str:
        return "HeapRankFeedbackHandler"

    @property
    def engine(self) -> Reranker:
        return self._engine

    @property
    def heaprank_state_key(self) -> str:
        """An opaque name of the state this handler writes to (see :func:`heaprank.adapters.state_key`)."""
        return self._key

    @property
    def reports(self) -> list[FeedbackReport]:
        """Every report made, oldest first."""
        with self._guard:
            return list(self._reports)

    @property
    def failed(self) -> int:
        """How many feedbacks could not be recorded (each logged at WARNING with its reason)."""
        return self._writer.failed

    @property
    def skipped(self) -> int:
        """How many answers were not recorded because their nodes showed no id to cite."""
        return self._writer.skipped

    @property
    def abstained(self) -> int:
        """How many answers were not recorded because ``usage`` could not tell what they used."""
        return self._writer.abstained

    async def aflush(self) -> None:
        """Wait for the feedback written from this event loop (``aquery``) to be recorded."""
        await self._writer.aflush()

    def install(self) -> HeapRankFeedbackHandler:
        """Register on the root dispatcher (a second call does nothing)."""
        root = get_dispatcher()
        if not any(h is self for h in root.span_handlers):
            root.add_span_handler(self)
        return self

    def uninstall(self) -> None:
        """Remove from the root dispatcher (LlamaIndex has no API for it: its list is public)."""
        root = get_dispatcher()
        root.span_handlers = [h for h in root.span_handlers if h is not self]

    # ------------------------------------------------------------ span hooks (no span state kept)

    def new_span(self, id_: str, bound_args: Any, instance: Any = None,
                 parent_span_id: str | None = None, tags: dict[str, Any] | None = None,
                 **kwargs: Any) -> SimpleSpan | None:
        return None

    def prepare_to_exit_span(self, id_: str, bound_args: Any, instance: Any = None,
                             result: Any = None, **kwargs: Any) -> SimpleSpan | None:
        if self._detector is not None and isinstance(getattr(result, "source_nodes", None), list):
            try:
                self._on_response(result)
            except Exception as exc:  # instrumentation swallows errors silently: count them
                self._writer.fail("(response)", exc)
        return None

    def prepare_to_drop_span(self, id_: str, bound_args: Any, instance: Any = None,
                             err: BaseException | None = None, **kwargs: Any) -> SimpleSpan | None:
        return None

    # ------------------------------------------------------------ reporting

    def _mine(self, rankings: list[_Ranking]) -> list[_Ranking]:
        """The rankings of this handler's state; warns once per state that no installed
        handler holds."""
        mine = [r for r in rankings if not surely_different(r.state, self._key)]
        others = {r.state for r in rankings} - {r.state for r in mine}
        installed = {getattr(h, "heaprank_state_key", None) for h in get_dispatcher().span_handlers}
        for key in others - installed - self._warned:
            self._warned.add(key)
            message = ("HeapRankFeedbackHandler: a response carries rankings of another state "
                       "than any installed handler's; their feedback cannot be recorded. Build "
                       "the handler with HeapRankFeedbackHandler(postprocessor)")
            logger.warning("heaprank: %s", message)
            warn_at_caller(message, StateMismatchWarning)
        return mine

    def _claim(self, rankings: list[_Ranking]) -> list[_Ranking]:
        """The rankings not reported yet; marks them, so outer spans with the same response skip."""
        with self._guard:
            fresh = [r for r in rankings if r.recall_id not in self._seen]
            for ranking in fresh:
                self._seen[ranking.recall_id] = None
            while len(self._seen) > self._keep:
                self._seen.popitem(last=False)
        return fresh

    def _on_response(self, response: Any) -> None:
        if isinstance(response, StreamingAgentChatResponse):
            # Still empty here, its text arrives through a queue with no end hook. The context
            # engines stream through a synthesizer's StreamingResponse, which was wrapped when its
            # span exited; any other engine's stream is reported with feedback(response, used=...).
            return
        rankings = self._claim(self._mine(_rankings(response.source_nodes)))
        if not rankings:
            return
        if isinstance(response, StreamingResponse) and response.response_txt is None:
            response.response_gen = self._drain(response.response_gen, rankings)
        elif isinstance(response, AsyncStreamingResponse) and response.response_txt is None:
            response.response_gen = self._adrain(response.response_gen, rankings)
        else:
            answer = getattr(response, "response", None)
            if isinstance(answer, str):
                self._detect_and_report(answer, rankings)

    def _drain(self, tokens: Iterable[str], rankings: list[_Ranking]) -> Generator[str, None, None]:
        parts = []
        for token in tokens:
            parts.append(token)
            yield token
        self._detect_and_report("".join(parts), rankings)

    async def _adrain(self, tokens: Any, rankings: list[_Ranking]) -> AsyncGenerator[str, None]:
        parts = []
        async for token in tokens:
            parts.append(token)
            yield token
        self._detect_and_report("".join(parts), rankings)

    def _detect_and_report(self, answer: str, rankings: list[_Ranking]) -> None:
        """Detect what ``answer`` used and write it; a detector that raises is counted (here at
        a stream's end too, where it would reach the app's loop over the tokens)."""
        assert self._detector is not None
        for ranking in rankings:
            try:
                used = detect(self._detector, answer, ranking.shown)
            except Exception as exc:
                self._writer.fail(ranking.recall_id, exc)
                continue
            if used is None:
                self._writer.abstain(ranking.recall_id, self._usage_name)
                continue
            if nothing_to_cite(self._usage_name, used, ranking.seen, ranking.shown):
                self._writer.skip(ranking.recall_id, SHOW_IDS)
                continue
            self._writer.write(ranking.recall_id, used, namespace=ranking.namespace,
                               done=functools.partial(self._reported, ranking, used))

    def _reported(self, ranking: _Ranking, used: Sequence[str], outcome: FeedbackOutcome) -> None:
        self._report(ranking, used, self._usage_name, outcome)

    def _report(self, ranking: _Ranking, used: Sequence[str], source: str,
                outcome: FeedbackOutcome) -> FeedbackReport:
        report = FeedbackReport(ranking.recall_id, tuple(s.id for s in ranking.shown), tuple(used),
                                source, outcome.applied + outcome.already_recorded,
                                ranking.namespace)
        with self._guard:
            self._reports.append(report)
            del self._reports[:-self._keep]
        return report

    def _plan(self, response: Any, used: Iterable[str],
              labels: Mapping[str, str] | None = None
              ) -> list[tuple[_Ranking, list[str], dict[str, str]]]:
        """Each heaprank ranking of ``response`` with the ids of ``used`` and ``labels`` it
        showed (names resolved)."""
        rankings = self._mine(_rankings(getattr(response, "source_nodes", None) or []))
        if not rankings:
            raise FeedbackError("response: no source node carries a heaprank ranking of this "
                                "handler's state")
        wanted, graded = list(used), dict(labels or {})
        plan: list[tuple[Any, list[str], dict[str, str]]] = []
        claimed: set[str] = set()
        for ranking in rankings:
            names = {name: s.id for s in ranking.shown for name in (s.id, *s.aliases)}
            plan.append((ranking, [names[u] for u in wanted if u in names],
                         {names[u]: label for u, label in graded.items() if u in names}))
            claimed.update(u for u in (*wanted, *graded) if u in names)
        unknown = [u for u in wanted if u not in claimed]
        if unknown:
            raise FeedbackError(f"used: {unknown} were not among the response's source nodes")
        unknown = [u for u in graded if u not in claimed]
        if unknown:
            raise FeedbackError(f"labels: {unknown} were not among the response's source nodes")
        return plan

    def feedback(self, response: Any, used: Iterable[str] = (), *,
                 labels: Mapping[str, str] | None = None) -> list[FeedbackReport]:
        """Report what ``response`` (a Response, chat response or drained stream) used; ids may be
        heaprank ids, node ids or ``ref_doc_id`` values. ``labels`` grades source nodes one by
        one, as the core's ``feedback(labels=...)``: ``{id: "used" | "ignored" | "outdated" |
        "wrong"}``.

        Raises:
            FeedbackError: the response has no heaprank nodes, or an id was not among them
                (nothing is written then); the core's errors as they come (the app's own call).
        """
        out = []
        for ranking, mine, graded in self._plan(response, used, labels):
            outcome = self._engine.feedback(ranking.recall_id, used=mine,
                                            namespace=ranking.namespace, labels=graded or None)
            out.append(self._report(ranking, mine, "explicit", outcome))
        return out

    async def afeedback(self, response: Any, used: Iterable[str] = (), *,
                        labels: Mapping[str, str] | None = None) -> list[FeedbackReport]:
        """Async :meth:`feedback` (the core's ``afeedback``)."""
        out = []
        for ranking, mine, graded in self._plan(response, used, labels):
            outcome = await self._engine.afeedback(ranking.recall_id, used=mine,
                                                   namespace=ranking.namespace,
                                                   labels=graded or None)
            out.append(self._report(ranking, mine, "explicit", outcome))
        return out
