"""``HeapRankFeedbackHandler``: closes the learning loop from LlamaIndex instrumentation.

A span handler on the root dispatcher sees every span's result. A query engine's ``Response``
and a chat engine's ``AgentChatResponse`` carry ``source_nodes`` (the postprocessed nodes, i.e.
what the LLM saw) and the answer text; the nodes carry heaprank's recall id, so no span linking is
needed. A streaming response is reported when its token stream is drained.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from heaprank import FeedbackError, Reranker
from heaprank.learning.attribution import Shown, UsageDetector, citations_or_overlap, cited, overlapping
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.chat_engine.types import StreamingAgentChatResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.schema import MetadataMode, NodeWithScore

from ._convert import logger
from .base import ID_KEY, RECALL_ID_KEY, HeapRankPostprocessor

Usage = Literal["citations", "overlap", "citations+overlap", "explicit"]


@dataclass(frozen=True, slots=True)
class FeedbackReport:
    """What the handler reported for one ranking."""

    recall_id: str
    shown: tuple[str, ...]
    used: tuple[str, ...]
    source: str  # the usage mode, or "explicit"


def _rankings(source_nodes: Sequence[NodeWithScore]) -> dict[str, list[Shown]]:
    """Shown nodes grouped by recall id, in the order the LLM saw them."""
    out: dict[str, list[Shown]] = {}
    for nws in source_nodes:
        meta = nws.node.metadata
        recall_id, doc_id = meta.get(RECALL_ID_KEY), meta.get(ID_KEY)
        if isinstance(recall_id, str) and isinstance(doc_id, str):
            aliases = tuple(a for a in (nws.node.node_id, nws.node.ref_doc_id) if a and a != doc_id)
            out.setdefault(recall_id, []).append(
                Shown(doc_id, aliases, nws.node.get_content(MetadataMode.NONE)))
    return out


class HeapRankFeedbackHandler(BaseSpanHandler[SimpleSpan]):
    """Report which reranked nodes each response used, from LlamaIndex instrumentation.

    ``handler.install()`` registers it on the root dispatcher (idempotent; ``uninstall()`` removes
    it). ``usage`` decides "used": ``"citations"`` (``[node-id]`` or ``[1]``, the position among
    the source nodes), ``"overlap"`` (opt-in word overlap), ``"citations+overlap"``, a callable
    ``(answer, shown) -> ids``, or ``"explicit"``: nothing automatic, the app calls
    :meth:`feedback` with the response. Each ranking is reported once.

    Args:
        reranker: The :class:`HeapRankPostprocessor` (or its :class:`heaprank.Reranker`).
    """

    _reranker: Reranker = PrivateAttr()
    _detector: UsageDetector | None = PrivateAttr(default=None)
    _usage_name: str = PrivateAttr(default="citations")
    _keep: int = PrivateAttr(default=4096)
    _seen: OrderedDict[str, None] = PrivateAttr(default_factory=OrderedDict)
    _guard: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _reports: list[FeedbackReport] = PrivateAttr(default_factory=list)

    def __init__(self, reranker: Reranker | HeapRankPostprocessor, *,
                 usage: Usage | UsageDetector = "citations", overlap_threshold: float = 0.5,
                 keep: int = 4096) -> None:
        super().__init__()
        self._reranker = reranker.engine if isinstance(reranker, HeapRankPostprocessor) else reranker
        named: dict[str, UsageDetector | None] = {
            "citations": cited,
            "overlap": lambda a, s: overlapping(a, s, threshold=overlap_threshold),
            "citations+overlap": citations_or_overlap(overlap_threshold),
            "explicit": None,
        }
        if callable(usage):
            self._detector, self._usage_name = usage, getattr(usage, "__name__", "custom")
        elif usage in named:
            self._detector, self._usage_name = named[usage], usage
        else:
            raise ValueError(f"usage: expected one of {sorted(named)} or a callable, got {usage!r}")
        self._keep = keep

    @classmethod
    def class_name(cls) -> str:
        return "HeapRankFeedbackHandler"

    @property
    def reports(self) -> list[FeedbackReport]:
        """Every report made, oldest first."""
        with self._guard:
            return list(self._reports)

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
            except Exception:  # instrumentation swallows errors silently: at least log them
                logger.exception("heaprank: feedback from a response failed")
        return None

    def prepare_to_drop_span(self, id_: str, bound_args: Any, instance: Any = None,
                             err: BaseException | None = None, **kwargs: Any) -> SimpleSpan | None:
        return None

    # ------------------------------------------------------------ reporting

    def _claim(self, rankings: dict[str, list[Shown]]) -> dict[str, list[Shown]]:
        """The rankings not reported yet; marks them, so outer spans with the same response skip."""
        with self._guard:
            fresh = {r: s for r, s in rankings.items() if r not in self._seen}
            for recall_id in fresh:
                self._seen[recall_id] = None
            while len(self._seen) > self._keep:
                self._seen.popitem(last=False)
        return fresh

    def _on_response(self, response: Any) -> None:
        if isinstance(response, StreamingAgentChatResponse):
            # Still empty here, its text arrives through a queue with no end hook. The context
            # engines stream through a synthesizer's StreamingResponse, which was wrapped when its
            # span exited; any other engine's stream is reported with feedback(response, used=...).
            return
        rankings = self._claim(_rankings(response.source_nodes))
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

    def _drain(self, tokens: Iterable[str], rankings: dict[str, list[Shown]]) -> Generator[str, None, None]:
        parts = []
        for token in tokens:
            parts.append(token)
            yield token
        self._detect_and_report("".join(parts), rankings)

    async def _adrain(self, tokens: Any, rankings: dict[str, list[Shown]]) -> AsyncGenerator[str, None]:
        parts = []
        async for token in tokens:
            parts.append(token)
            yield token
        self._detect_and_report("".join(parts), rankings)

    def _detect_and_report(self, answer: str, rankings: dict[str, list[Shown]]) -> None:
        assert self._detector is not None
        for recall_id, shown in rankings.items():
            self._apply(recall_id, shown, self._detector(answer, shown), self._usage_name)

    def _apply(self, recall_id: str, shown: Sequence[Shown], used: Sequence[str], source: str) -> None:
        self._reranker.feedback(recall_id, used=list(used))
        report = FeedbackReport(recall_id, tuple(s.id for s in shown), tuple(used), source)
        with self._guard:
            self._reports.append(report)
            del self._reports[:-self._keep]

    def feedback(self, response: Any, used: Iterable[str]) -> list[FeedbackReport]:
        """Report what ``response`` (a Response, chat response or drained stream) used; ids may be
        heaprank ids, node ids or ``ref_doc_id`` values.

        Raises:
            FeedbackError: the response has no heaprank nodes, or an id was not among them.
        """
        rankings = _rankings(getattr(response, "source_nodes", None) or [])
        if not rankings:
            raise FeedbackError("response: no source node carries a heaprank recall id")
        wanted = list(used)
        plan: list[tuple[str, list[Shown], list[str]]] = []
        claimed: set[str] = set()
        for recall_id, shown in rankings.items():
            names = {name: s.id for s in shown for name in (s.id, *s.aliases)}
            plan.append((recall_id, shown, [names[u] for u in wanted if u in names]))
            claimed.update(u for u in wanted if u in names)
        unknown = [u for u in wanted if u not in claimed]
        if unknown:
            raise FeedbackError(f"used: {unknown} were not among the response's source nodes")
        start = len(self.reports)
        for recall_id, shown, mine in plan:
            self._apply(recall_id, shown, mine, "explicit")
        return self.reports[start:]
