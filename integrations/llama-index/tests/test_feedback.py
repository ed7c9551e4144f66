"""HeapRankFeedbackHandler on real query and chat engines: sync, async and streaming."""

from __future__ import annotations

import asyncio
import logging
import warnings
from pathlib import Path

import pytest
from heaprank import FeedbackError, Reranker
from llama_index.core import VectorStoreIndex
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.dispatcher import instrument_tags

from li_support import NOW, CitingLLM
from llama_index.postprocessor.heaprank import (
    HeapRankFeedbackHandler,
    HeapRankPostprocessor,
    StateMismatchWarning,
)

QUERY = "When is my flight to Lisbon?"


def _engine(index: VectorStoreIndex, llm: CitingLLM, pp: HeapRankPostprocessor, **kwargs):
    return index.as_query_engine(llm=llm, similarity_top_k=4, node_postprocessors=[pp], **kwargs)


def _ids(response) -> list[str]:
    return [n.node.metadata["heaprank_id"] for n in response.source_nodes]


def test_query_engine_reports_a_positional_citation(index, llm, postprocessor, handler) -> None:
    llm.answer = "It departs March 14 [2]."
    response = _engine(index, llm, postprocessor).query(QUERY)
    [report] = handler.reports
    assert report.shown == tuple(_ids(response))
    assert report.used == (_ids(response)[1],)
    assert report.recall_id == response.source_nodes[0].node.metadata["heaprank_recall_id"]
    assert postprocessor.engine.links("default")


def test_citation_by_source_document_id(index, llm, postprocessor, handler) -> None:
    llm.answer = "About 400 dollars [price]."
    response = _engine(index, llm, postprocessor).query(QUERY)
    [report] = handler.reports
    assert report.used == tuple(i for i in _ids(response) if i.startswith("price#"))


def test_async_query_writes_through_afeedback(index, llm, postprocessor, handler) -> None:
    llm.answer = "[1]"

    async def run():
        response = await _engine(index, llm, postprocessor).aquery(QUERY)
        pending = list(handler._writer._tasks)  # a task on the loop, not a blocking call
        await handler.aflush()
        return response, pending

    response, pending = asyncio.run(run())
    [report] = handler.reports
    assert len(pending) == 1 and report.used == (_ids(response)[0],)
    assert postprocessor.engine.stats()["feedbacks"] == 1


def test_streaming_is_reported_when_the_stream_is_drained(index, llm, postprocessor, handler) -> None:
    llm.answer = "The flight departs March 14 [1]."
    response = _engine(index, llm, postprocessor, streaming=True).query(QUERY)
    assert handler.reports == []
    text = "".join(response.response_gen)
    assert text == llm.answer
    [report] = handler.reports
    assert report.used == (_ids(response)[0],)


def test_async_streaming_is_reported_when_drained(index, llm, postprocessor, handler) -> None:
    llm.answer = "Departs March 14 [3]."

    async def run() -> tuple[object, list]:
        response = await _engine(index, llm, postprocessor, streaming=True).aquery(QUERY)
        before = handler.reports
        async for _ in response.async_response_gen():
            pass
        return response, before

    response, before = asyncio.run(run())
    assert before == []
    [report] = handler.reports
    assert report.used == (_ids(response)[2],)


@pytest.mark.parametrize("use_async", [False, True])
def test_chat_engine(index, llm, postprocessor, handler, use_async: bool) -> None:
    llm.answer = "Your flight is on March 14 [1]."
    chat = index.as_chat_engine(chat_mode="context", llm=llm, node_postprocessors=[postprocessor])
    response = asyncio.run(chat.achat(QUERY)) if use_async else chat.chat(QUERY)
    [report] = handler.reports
    assert report.used == (_ids(response)[0],)


def test_explicit_feedback(index, llm, postprocessor) -> None:
    handler = HeapRankFeedbackHandler(postprocessor, usage="explicit").install()
    try:
        llm.answer = "An answer with no citation [1]."
        response = _engine(index, llm, postprocessor).query(QUERY)
        assert handler.reports == [] and not postprocessor.engine.links("default")
        node = response.source_nodes[1].node
        [report] = handler.feedback(response, used=[node.node_id])  # a node id works too
        assert report.used == (node.metadata["heaprank_id"],) and report.source == "explicit"
        with pytest.raises(FeedbackError, match="not among"):
            handler.feedback(response, used=["elsewhere"])
    finally:
        handler.uninstall()


def test_overlap_is_opt_in(index, llm) -> None:
    llm.answer = "You booked the flight to Lisbon; it departs March 14 at 9:40."
    for usage, expect_booked in (("citations", False), ("overlap", True)):
        pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW, citations=True)
        handler = HeapRankFeedbackHandler(pp, usage=usage).install()
        try:
            _engine(index, llm, pp).query(QUERY)
            [report] = handler.reports
            assert any(u.startswith("booked#") for u in report.used) is expect_booked
        finally:
            handler.uninstall()


def test_install_is_idempotent_and_uninstall_removes(postprocessor) -> None:
    handler = HeapRankFeedbackHandler(postprocessor)
    root = get_dispatcher()
    handler.install()
    handler.install()
    assert sum(h is handler for h in root.span_handlers) == 1
    handler.uninstall()
    assert all(h is not handler for h in root.span_handlers)


def test_learning_through_the_handler_moves_the_cited_node_up(index, llm, postprocessor, handler) -> None:
    engine = _engine(index, llm, postprocessor)
    llm.answer = "no citation"
    before = _ids(engine.query(QUERY))
    target = before[-1]
    llm.answer = f"[{target.split('#')[0]}]"  # cited by its source document's id
    for _ in range(5):
        engine.query(QUERY)
    assert all(r.used == (target,) for r in handler.reports[1:])
    llm.answer = "no citation"
    after = _ids(engine.query(QUERY))
    assert after.index(target) < before.index(target)


def test_streaming_chat_is_reported_when_drained(index, llm, postprocessor, handler) -> None:
    llm.answer = "March 14 [1]."
    chat = index.as_chat_engine(chat_mode="context", llm=llm, node_postprocessors=[postprocessor])
    response = chat.stream_chat(QUERY)
    # LlamaIndex may drain the stream on a thread of its own, so the report can come before or
    # after this line; what matters is that it is never the still-empty answer ("nothing used").
    assert all(r.used for r in handler.reports)
    assert "March 14" in "".join(response.response_gen)
    [report] = handler.reports
    assert report.used == (_ids(response)[0],)


@pytest.mark.parametrize("how", ["url", "postprocessor"])
def test_a_handler_from_a_url_or_the_postprocessor_learns(tmp_path: Path, index, llm, how: str) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    pp = HeapRankPostprocessor(state=url, top_n=3, now=NOW)
    handler = HeapRankFeedbackHandler(url if how == "url" else pp).install()
    try:
        llm.answer = "[1]"
        _engine(index, llm, pp).query(QUERY)
    finally:
        handler.uninstall()
    [report] = handler.reports
    assert report.used and handler.failed == 0 and Reranker(url).stats()["feedbacks"] == 1


def test_a_handler_of_the_wrong_type_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="HeapRankFeedbackHandler.state"):
        HeapRankFeedbackHandler(42)  # type: ignore[arg-type]


def test_another_state_is_reported_at_construction_and_at_the_first_response(index, llm) -> None:
    handler = HeapRankFeedbackHandler(Reranker()).install()  # another in-memory state
    try:
        with pytest.warns(StateMismatchWarning, match="another state"):
            pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW)
        llm.answer = "[1]"
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(2):
                _engine(index, llm, pp).query(QUERY)
    finally:
        handler.uninstall()
    assert len([w for w in seen if issubclass(w.category, StateMismatchWarning)]) == 1
    assert handler.reports == [] and not pp.engine.links("default")


def test_a_feedback_that_fails_is_logged_with_its_reason_and_counted(
        tmp_path: Path, index, llm, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    pp = HeapRankPostprocessor(state=url, top_n=3, now=NOW)
    handler = HeapRankFeedbackHandler(url + "?mode=ro").install()  # same state, read-only
    try:
        llm.answer = "[1]"
        with caplog.at_level(logging.WARNING, logger="llama_index.postprocessor.heaprank"):
            assert str(_engine(index, llm, pp).query(QUERY)) == "[1]"
    finally:
        handler.uninstall()
    assert handler.failed == 1 and handler.reports == []
    [record] = [r for r in caplog.records if "not recorded" in r.getMessage()]
    assert record.levelno == logging.WARNING and "Traceback" not in record.getMessage()
    assert record.exc_info is None


def test_the_handler_writes_in_the_namespace_the_ranking_was_made_in(index, llm) -> None:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW, namespace="user:maya")
    handler = HeapRankFeedbackHandler(pp).install()
    try:
        llm.answer = "It departs March 14 [1]."
        response = _engine(index, llm, pp).query(QUERY)
        with instrument_tags({"heaprank_namespace": "user:ali"}):
            _engine(index, llm, pp).query(QUERY)
    finally:
        handler.uninstall()
    maya, ali = handler.reports
    assert (maya.namespace, ali.namespace) == ("user:maya", "user:ali")
    assert maya.used == (_ids(response)[0],)
    # Written with namespace=: the state's outcome names every shown id, used or ignored
    # (without it, only the ids the handler named itself).
    assert set(maya.recorded) == set(maya.shown) and set(ali.recorded) == set(ali.shown)
    assert pp.engine.links("user:maya") and pp.engine.links("user:ali")
    assert not pp.engine.links("default")


def test_async_and_explicit_feedback_write_in_the_ranking_s_namespace(index, llm) -> None:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW, namespace="user:maya")
    handler = HeapRankFeedbackHandler(pp).install()
    explicit = HeapRankFeedbackHandler(pp, usage="explicit")
    try:
        llm.answer = "[2]"

        async def run():
            response = await _engine(index, llm, pp).aquery(QUERY)
            await handler.aflush()
            return response

        response = asyncio.run(run())
        [auto] = handler.reports
        assert auto.namespace == "user:maya" and set(auto.recorded) == set(auto.shown)
        [sync] = explicit.feedback(response, used=[_ids(response)[1]])  # a retry: recorded already
        [again] = asyncio.run(explicit.afeedback(response, used=[_ids(response)[1]]))
    finally:
        handler.uninstall()
    assert set(sync.recorded) == set(again.recorded) == set(auto.shown)
    assert not pp.engine.links("default") and pp.engine.stats()["feedbacks"] == 1


@pytest.mark.parametrize("streaming", [False, True])
def test_a_usage_callable_that_raises_is_counted_not_swallowed(
        index, llm, postprocessor, streaming: bool, caplog: pytest.LogCaptureFixture) -> None:
    def broken(answer: str, shown: object) -> list[str]:
        raise KeyError("no such field")

    handler = HeapRankFeedbackHandler(postprocessor, usage=broken).install()
    llm.answer = "March 14 [1]."
    try:
        with caplog.at_level(logging.WARNING):
            response = _engine(index, llm, postprocessor, streaming=streaming).query(QUERY)
            text = "".join(response.response_gen) if streaming else str(response)
    finally:
        handler.uninstall()
    assert text == llm.answer  # the app's answer, stream drained to its end without an error
    assert handler.failed == 1 and handler.reports == []
    [record] = [r for r in caplog.records if "not recorded" in r.getMessage()]
    assert "KeyError" in record.getMessage() and record.exc_info is None


def test_explicit_feedback_with_labels_reaches_the_core(index, llm, postprocessor) -> None:
    from heaprank.state import codec

    handler = HeapRankFeedbackHandler(postprocessor, usage="explicit").install()
    try:
        llm.answer = "An answer with no citation [1]."
        response = _engine(index, llm, postprocessor).query(QUERY)
        first, second = (n.node for n in response.source_nodes[:2])
        [report] = handler.feedback(response, used=[first.node_id],
                                    labels={second.node_id: "wrong"})
        stored = postprocessor.engine.state.get_impression(report.recall_id)
        verdicts = dict(zip(report.shown, stored.verdicts))
        assert verdicts[second.metadata["heaprank_id"]] == codec.WRONG
        with pytest.raises(FeedbackError, match="labels: .* were not among"):
            handler.feedback(response, labels={"elsewhere": "outdated"})
        again = _engine(index, llm, postprocessor).query(QUERY)
        node = again.source_nodes[0].node
        [late] = asyncio.run(handler.afeedback(again, labels={node.node_id: "outdated"}))
        stored = postprocessor.engine.state.get_impression(late.recall_id)
        assert dict(zip(late.shown, stored.verdicts))[node.metadata["heaprank_id"]] == \
            codec.OUTDATED
    finally:
        handler.uninstall()
