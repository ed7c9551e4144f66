"""Every keyword of ``invoke``/``ainvoke`` is honoured or refused by name: one retriever serves
many users, so the namespace of one call is a keyword (or the run's config metadata), and a
count keyword of another package never silently returns the default count."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from heaprank import FeedbackError
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_heaprank import HeapRankFeedbackHandler, HeapRankRetriever
from lc_support import NOW

QUERY = "When is my flight to Lisbon?"


def _recall(docs: list) -> tuple[str, str]:
    return docs[0].metadata["heaprank_recall_id"], docs[0].metadata["heaprank_id"]


@pytest.mark.parametrize("use_async", [False, True])
def test_namespace_per_call_is_where_the_impression_and_its_feedback_go(
        store: InMemoryVectorStore, use_async: bool) -> None:
    hr = HeapRankRetriever(vectorstore=store, state="memory://", now=NOW)
    docs = asyncio.run(hr.ainvoke(QUERY, namespace="user:x")) if use_async else \
        hr.invoke(QUERY, namespace="user:x")
    recall_id, first = _recall(docs)
    with pytest.raises(FeedbackError):  # not a recall of the retriever's own namespace
        hr.engine.feedback(recall_id, used=[first], namespace="default")
    outcome = hr.engine.feedback(recall_id, used=[first], namespace="user:x")
    assert set(outcome.applied) == {d.metadata["heaprank_id"] for d in docs}
    assert hr.engine.links("user:x") and not hr.engine.links("default")


def test_the_call_keyword_wins_over_the_run_metadata_and_the_field(store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(vectorstore=store, state="memory://", namespace="user:field", now=NOW)
    maya = {"metadata": {"heaprank_namespace": "user:maya"}}
    for kwargs, expected in (({}, "user:field"), ({"config": maya}, "user:maya"),
                             ({"config": maya, "namespace": "user:x"}, "user:x")):
        recall_id, first = _recall(hr.invoke(QUERY, **kwargs))
        hr.engine.feedback(recall_id, used=[first], namespace=expected)
    assert {ns for ns in ("user:field", "user:maya", "user:x") if hr.engine.links(ns)} == \
        {"user:field", "user:maya", "user:x"}


def test_the_handler_records_in_the_namespace_of_the_call(store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(vectorstore=store, state="memory://", k=3, now=NOW)
    handler = HeapRankFeedbackHandler(hr, usage="explicit")
    run_id = uuid.uuid4()
    app = RunnableLambda(lambda question: hr.invoke(question, namespace="user:x"))  # in a trace
    docs = app.invoke(QUERY, config={"callbacks": [handler], "run_id": run_id})
    [report] = handler.feedback(run_id, used=[docs[0].id])
    assert report.namespace == "user:x" and set(report.recorded) == set(report.shown)
    assert hr.engine.links("user:x") and not hr.engine.links("default")


@pytest.mark.parametrize(("keyword", "hint"), [("top_n", "k="), ("top_k", "k="),
                                               ("n", "k="), ("filter", "search_kwargs")])
def test_a_keyword_it_does_not_honour_is_a_type_error_naming_it(
        store: InMemoryVectorStore, keyword: str, hint: str) -> None:
    hr = HeapRankRetriever(vectorstore=store, state="memory://", k=4, now=NOW)
    with pytest.raises(TypeError, match=rf"'{keyword}'.*{hint}"):
        hr.invoke(QUERY, **{keyword: 2})
    with pytest.raises(TypeError, match=rf"'{keyword}'"):
        asyncio.run(hr.ainvoke(QUERY, **{keyword: 2}))
    assert hr.engine.stats()["impressions"] == 0  # refused before anything was recorded


def test_fetch_k_and_search_kwargs_per_call_reach_the_vector_store(store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(vectorstore=store, state="memory://", k=4, now=NOW)
    assert len(hr.invoke(QUERY)) == 4
    assert len(hr.invoke(QUERY, fetch_k=2)) == 2  # only two candidates were fetched
    assert len(asyncio.run(hr.ainvoke(QUERY, fetch_k=2))) == 2
    only_facts = hr.invoke(QUERY, search_kwargs={"filter": lambda d: d.metadata["kind"] == "fact"})
    assert {d.metadata["kind"] for d in only_facts} == {"fact"} and len(only_facts) == 2


def test_fetch_k_is_refused_where_the_base_retriever_decides_how_many(
        store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(base_retriever=store.as_retriever(), state="memory://", now=NOW)
    for keyword in ("fetch_k", "search_kwargs"):
        with pytest.raises(TypeError, match=rf"'{keyword}'.*vectorstore="):
            hr.invoke(QUERY, **{keyword: 2 if keyword == "fetch_k" else {"filter": None}})


@pytest.mark.parametrize("bad", ["", 7, "*"])
def test_a_namespace_per_call_that_is_not_a_name_is_refused(store: InMemoryVectorStore,
                                                            bad: object) -> None:
    hr = HeapRankRetriever(vectorstore=store, state="memory://", now=NOW)
    with pytest.raises((TypeError, ValueError), match="namespace"):
        hr.invoke(QUERY, namespace=bad)
