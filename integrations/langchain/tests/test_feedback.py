"""HeapRankFeedbackHandler on real LCEL chains with a fake chat model from langchain-core."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
import warnings
from pathlib import Path

import pytest
from heaprank import FeedbackError, Reranker
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_heaprank import (
    HeapRankFeedbackHandler,
    HeapRankReranker,
    HeapRankRetriever,
    StateMismatchWarning,
)
from lc_support import MEMORIES, NOW

QUERY = "When is my flight to Lisbon?"
PROMPT = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")


def _format(docs: list) -> str:
    return "\n".join(f"[{d.metadata['heaprank_id']}] {d.page_content}" for d in docs)


def _chain(store: InMemoryVectorStore, engine: Reranker | str, answers: list[str], *, k: int = 4):
    hr = HeapRankRetriever(base_retriever=store.as_retriever(search_kwargs={"k": k}), state=engine,
                           k=3, now=NOW)
    llm = FakeListChatModel(responses=answers)
    return hr, {"context": hr | _format, "question": RunnablePassthrough()} | PROMPT | llm | \
        StrOutputParser()


def _only_report(handler: HeapRankFeedbackHandler):
    [report] = handler.reports
    return report


def test_invoke_reports_the_cited_id(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    _, chain = _chain(store, engine, ["It departs March 14 [booked]."])
    handler = HeapRankFeedbackHandler(engine)
    run_id = uuid.uuid4()
    chain.invoke(QUERY, config={"callbacks": [handler], "run_id": run_id})
    report = _only_report(handler)
    assert report.run_id == run_id
    assert report.used == ("booked",)
    assert len(report.shown) == 3 and report.source == "citations+coverage"
    assert engine.stats()["impressions"] >= 1
    links = engine.links("default")
    assert links and all(link.n > 0 for link in links)


def test_reports_is_a_list_of_every_report_oldest_first(store: InMemoryVectorStore) -> None:
    """One shape with the LlamaIndex handler's: a list, each report naming its trace."""
    engine = Reranker()
    _, chain = _chain(store, engine, ["[booked]", "[price]", "[wish]"])
    handler = HeapRankFeedbackHandler(engine, keep=2)
    run_ids = [uuid.uuid4() for _ in range(3)]
    for run_id in run_ids:
        chain.invoke(QUERY, config={"callbacks": [handler], "run_id": run_id})
    assert isinstance(handler.reports, list)
    assert [(r.run_id, r.used) for r in handler.reports] == [(run_ids[1], ("price",)),
                                                            (run_ids[2], ("wish",))]


def test_positional_citation(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    _, chain = _chain(store, engine, ["See [2]."])
    handler = HeapRankFeedbackHandler(engine)
    chain.invoke(QUERY, config={"callbacks": [handler]})
    report = _only_report(handler)
    assert report.used == (report.shown[1],)


def test_ainvoke_reports_through_afeedback(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    _, chain = _chain(store, engine, ["[price] about 400 dollars"])
    handler = HeapRankFeedbackHandler(engine)

    async def run() -> int:
        await chain.ainvoke(QUERY, config={"callbacks": [handler]})
        pending = len(handler.writer._tasks)  # written in a task on the loop, not inline
        await handler.aflush()
        return pending

    assert asyncio.run(run()) == 1
    assert _only_report(handler).used == ("price",) and engine.stats()["feedbacks"] == 1


def test_stream_reports_after_the_stream_is_drained(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    _, chain = _chain(store, engine, ["March 14 [booked]"])
    handler = HeapRankFeedbackHandler(engine)
    chunks = chain.stream(QUERY, config={"callbacks": [handler]})
    first = next(chunks)
    assert first and not handler.reports
    "".join(chunks)
    assert _only_report(handler).used == ("booked",)


def test_parallel_branches_on_worker_threads(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    hr, _ = _chain(store, engine, [])
    threads: set[str] = set()

    def note_thread(docs: list) -> str:
        threads.add(threading.current_thread().name)
        return _format(docs)

    other = HeapRankRetriever(vectorstore=store, state=engine, k=2, now=NOW)
    chain = RunnableParallel(a=hr | note_thread, b=other | note_thread,
                             question=RunnablePassthrough()) \
        | (lambda x: f"{x['a']}\n{x['b']}\n{x['question']}") \
        | FakeListChatModel(responses=["[booked] and [dentist]"]) | StrOutputParser()
    handler = HeapRankFeedbackHandler(engine)
    chain.invoke(QUERY, config={"callbacks": [handler]})
    assert threading.current_thread().name not in threads  # the branches ran on pool threads
    reports = handler.reports
    assert len(reports) == 2  # one per reranked retrieval, both in one trace
    for report in reports:
        assert set(report.used) == {"booked", "dentist"} & set(report.shown)


def test_two_retriever_runs_pick_the_reranked_one(store: InMemoryVectorStore) -> None:
    classic = pytest.importorskip("langchain_classic.retrievers")
    engine = Reranker()
    ccr = classic.ContextualCompressionRetriever(
        base_compressor=HeapRankReranker(state=engine, top_n=2, now=NOW),
        base_retriever=store.as_retriever(search_kwargs={"k": 4}))
    chain = {"context": ccr | _format, "question": RunnablePassthrough()} | PROMPT | \
        FakeListChatModel(responses=["[1]"]) | StrOutputParser()
    handler = HeapRankFeedbackHandler(engine)
    chain.invoke(QUERY, config={"callbacks": [handler]})
    report = _only_report(handler)
    assert len(report.shown) == 2  # the reranked top 2, not the raw 4 of the inner retriever
    assert report.used == (report.shown[0],)


def test_explicit_feedback_later_by_run_id(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    hr, chain = _chain(store, engine, ["Some answer without citations"])
    handler = HeapRankFeedbackHandler(engine, usage="explicit")
    run_id = uuid.uuid4()
    chain.invoke(QUERY, config={"callbacks": [handler], "run_id": run_id})
    assert not handler.reports and not engine.links("default")
    reports = handler.feedback(str(run_id), used=["wish"])
    assert reports[0].used == ("wish",) and reports[0].source == "explicit"
    assert engine.links("default")
    with pytest.raises(FeedbackError, match="not shown"):
        handler.feedback(run_id, used=["nope"])
    with pytest.raises(FeedbackError, match="run_id"):
        handler.feedback(uuid.uuid4(), used=["wish"])
    with pytest.raises(FeedbackError, match="not a run id"):  # not "badly formed hexadecimal"
        handler.feedback("not-a-uuid", used=["wish"])
    again = uuid.uuid4()
    chain.invoke(QUERY, config={"callbacks": [handler], "run_id": again})
    [report] = asyncio.run(handler.afeedback(again, used=["booked"]))  # the async twin
    assert report.used == ("booked",) and engine.stats()["feedbacks"] == 2


def test_app_output_names_the_used_ids(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    hr, _ = _chain(store, engine, [])
    chain = hr | RunnableLambda(lambda docs: {"answer": "x", "heaprank_used": [docs[-1].id]})
    handler = HeapRankFeedbackHandler(engine)
    chain.invoke(QUERY, config={"callbacks": [handler]})
    report = _only_report(handler)
    assert report.used == (report.shown[-1],) and report.source == "app"


def test_overlap_heuristic_is_opt_in(store: InMemoryVectorStore) -> None:
    answer = "You booked the flight to Lisbon; it departs March 14 at 9:40."
    for usage, expected in (("citations", ()), ("overlap", ("booked",))):
        engine = Reranker()
        _, chain = _chain(store, engine, [answer])
        handler = HeapRankFeedbackHandler(engine, usage=usage)
        chain.invoke(QUERY, config={"callbacks": [handler]})
        assert _only_report(handler).used == expected


def test_by_default_an_uncited_answer_is_attributed_by_its_coverage_or_not_at_all(
        store: InMemoryVectorStore, caplog: pytest.LogCaptureFixture) -> None:
    engine = Reranker()
    covered = "You booked the flight: SFO to LIS, March 14."
    _, chain = _chain(store, engine, [covered, "I could not say, sorry."])
    handler = HeapRankFeedbackHandler(engine)
    chain.invoke(QUERY, config={"callbacks": [handler]})
    assert _only_report(handler).used == ("booked",)  # the booking holds the answer's words
    with caplog.at_level(logging.DEBUG, logger="langchain_heaprank"):
        chain.invoke(QUERY, config={"callbacks": [handler]})
    # nothing cited, nothing covered: no feedback at all, never "nothing was used"
    assert len(handler.reports) == 1 and handler.abstained == 1
    assert engine.stats()["feedbacks"] == 1
    assert any("could not tell what it used" in r.getMessage() for r in caplog.records)


def test_a_failed_run_gives_no_feedback(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    hr, _ = _chain(store, engine, [])

    def boom(_: object) -> str:
        raise RuntimeError("model down")

    handler = HeapRankFeedbackHandler(engine)
    with pytest.raises(RuntimeError):
        (hr | boom).invoke(QUERY, config={"callbacks": [handler]})
    assert not handler.reports and not engine.links("default")


def test_handler_and_direct_feedback_give_identical_state(store: InMemoryVectorStore) -> None:
    via_handler, direct = Reranker(), Reranker()
    _, chain = _chain(store, via_handler, ["[booked] [price]"] * 3)
    handler = HeapRankFeedbackHandler(via_handler)
    hr_direct = HeapRankRetriever(base_retriever=store.as_retriever(search_kwargs={"k": 4}),
                                  state=direct, k=3, now=NOW)
    for _ in range(3):
        chain.invoke(QUERY, config={"callbacks": [handler]})
        shown = hr_direct.invoke(QUERY)
        direct.feedback(shown[0].metadata["heaprank_recall_id"], used=["booked", "price"])
    assert via_handler.links("*") == direct.links("*")
    assert via_handler.links("default") == direct.links("default")
    docs = [d.model_copy() for d in MEMORIES]
    a = via_handler.rerank(QUERY, [{"id": d.id, "text": d.page_content} for d in docs], now=NOW,
                           track=False)
    b = direct.rerank(QUERY, [{"id": d.id, "text": d.page_content} for d in docs], now=NOW, track=False)
    assert [(r.id, r.score) for r in a] == [(r.id, r.score) for r in b]


def test_unknown_usage_is_named() -> None:
    with pytest.raises(ValueError, match="usage"):
        HeapRankFeedbackHandler(Reranker(), usage="guess")  # type: ignore[arg-type]


@pytest.mark.parametrize("state", ["url", "retriever"])
def test_a_handler_from_a_url_or_the_retriever_learns(tmp_path: Path, store: InMemoryVectorStore,
                                                      state: str) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    hr, chain = _chain(store, url, ["It departs March 14 [booked]."])
    handler = HeapRankFeedbackHandler(url if state == "url" else hr)
    chain.invoke(QUERY, config={"callbacks": [handler]})
    assert _only_report(handler).used == ("booked",) and handler.failed == 0
    assert Reranker(url).stats()["feedbacks"] == 1


def test_a_handler_of_the_wrong_type_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="HeapRankFeedbackHandler.state"):
        HeapRankFeedbackHandler({"state": "sqlite:///x.db"})  # type: ignore[arg-type]


def test_a_handler_on_another_state_is_reported_once_loudly(store: InMemoryVectorStore,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    engine = Reranker()
    _, chain = _chain(store, engine, ["[booked]", "[booked]"])
    handler = HeapRankFeedbackHandler(Reranker())  # another in-memory state
    with warnings.catch_warnings(record=True) as seen, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        for _ in range(2):
            chain.invoke(QUERY, config={"callbacks": [handler]})
    mismatch = [w for w in seen if issubclass(w.category, StateMismatchWarning)]
    assert len(mismatch) == 1 and "another state" in str(mismatch[0].message)
    assert not handler.reports and not engine.links("default")
    assert not [r for r in caplog.records if "Error in" in r.getMessage()]  # no swallowed lines


def test_a_feedback_that_fails_is_logged_with_its_reason_and_counted(
        tmp_path: Path, store: InMemoryVectorStore, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _, chain = _chain(store, url, ["[booked]"])
    handler = HeapRankFeedbackHandler(url + "?mode=ro")  # same state, opened read-only
    with caplog.at_level(logging.WARNING, logger="langchain_heaprank"):
        assert chain.invoke(QUERY, config={"callbacks": [handler]}) == "[booked]"
    assert handler.failed == 1 and not handler.reports
    [record] = [r for r in caplog.records if "not recorded" in r.getMessage()]
    assert record.levelno == logging.WARNING and "read" in record.getMessage().lower()


MAYA = {"metadata": {"heaprank_namespace": "user:maya"}}


def test_the_handler_writes_in_the_namespace_the_ranking_was_made_in(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    _, chain = _chain(store, engine, ["It departs March 14 [booked]."])
    handler = HeapRankFeedbackHandler(engine)
    chain.invoke(QUERY, config={"callbacks": [handler], **MAYA})
    report = _only_report(handler)
    assert report.namespace == "user:maya" and report.used == ("booked",)
    # Written with namespace=: the state's outcome names every shown id, used or ignored
    # (without it, only the ids the handler named itself).
    assert set(report.recorded) == set(report.shown)
    assert engine.links("user:maya") and not engine.links("default")


def test_async_and_explicit_feedback_write_in_the_ranking_s_namespace(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    _, chain = _chain(store, engine, ["[price] about 400 dollars", "no citation"])
    handler = HeapRankFeedbackHandler(engine)

    async def run() -> None:
        await chain.ainvoke(QUERY, config={"callbacks": [handler], **MAYA})
        await handler.aflush()

    asyncio.run(run())
    report = _only_report(handler)
    assert report.used == ("price",) and set(report.recorded) == set(report.shown)
    explicit = HeapRankFeedbackHandler(engine, usage="explicit")
    run_id = uuid.uuid4()
    chain.invoke(QUERY, config={"callbacks": [explicit], "run_id": run_id, **MAYA})
    [sync] = explicit.feedback(run_id, used=["wish"])
    assert sync.namespace == "user:maya" and set(sync.recorded) == set(sync.shown)
    [again] = asyncio.run(explicit.afeedback(run_id, used=["wish"]))  # a retry: recorded already
    assert set(again.recorded) == set(sync.shown)
    assert not engine.links("default") and engine.stats()["feedbacks"] == 2


def test_a_usage_callable_that_raises_is_counted_not_swallowed(
        store: InMemoryVectorStore, caplog: pytest.LogCaptureFixture) -> None:
    def broken(answer: str, shown: object) -> list[str]:
        raise KeyError("no such field")

    engine = Reranker()
    _, chain = _chain(store, engine, ["[booked]"])
    handler = HeapRankFeedbackHandler(engine, usage=broken)
    with caplog.at_level(logging.WARNING):
        assert chain.invoke(QUERY, config={"callbacks": [handler]}) == "[booked]"
    assert handler.failed == 1 and not handler.reports
    [record] = [r for r in caplog.records if "not recorded" in r.getMessage()]
    assert record.levelno == logging.WARNING and "KeyError" in record.getMessage()
    assert not [r for r in caplog.records if "Error in" in r.getMessage()]  # no swallowed line


def test_explicit_feedback_with_labels_reaches_the_core(store: InMemoryVectorStore) -> None:
    from heaprank.state import codec

    engine = Reranker()
    hr, chain = _chain(store, engine, ["Some answer without citations"])
    handler = HeapRankFeedbackHandler(engine, usage="explicit")
    run_id = uuid.uuid4()
    chain.invoke(QUERY, config={"callbacks": [handler], "run_id": run_id})
    [report] = handler.feedback(run_id, used=["wish"], labels={"booked": "outdated"})
    verdicts = dict(zip(report.shown, engine.state.get_impression(report.recall_id).verdicts))
    assert verdicts["wish"] == codec.USED and verdicts["booked"] == codec.OUTDATED
    with pytest.raises(FeedbackError, match="labels: \\['nope'\\] were not shown"):
        handler.feedback(run_id, labels={"nope": "wrong"})
    again = uuid.uuid4()
    chain.invoke(QUERY, config={"callbacks": [handler], "run_id": again})
    [late] = asyncio.run(handler.afeedback(again, labels={"booked": "wrong"}))
    verdicts = dict(zip(late.shown, engine.state.get_impression(late.recall_id).verdicts))
    assert verdicts["booked"] == codec.WRONG
