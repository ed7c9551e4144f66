"""An answer that cites nothing, after a prompt that showed the model no id to cite, teaches
nothing: with ``usage="citations"`` it is skipped (``handler.skipped``), never recorded as "every
shown document was ignored", and the handler says once what to change."""

from __future__ import annotations

import logging

import pytest
from heaprank import Reranker
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_heaprank import HeapRankFeedbackHandler, HeapRankRetriever
from lc_support import NOW

QUESTIONS = ["When is my flight to Lisbon?", "When do I fly to Lisbon?", "What time is my flight?"]
PROMPT = ChatPromptTemplate.from_template("Answer from the context.\n{context}\n\nQ: {question}")
ANSWER = "It departs March 14 at 9:40."  # what a model that was shown no ids answers


def page_text_only(docs: list) -> str:
    """LangChain's usual ``format_docs``: the model sees the text, no id."""
    return "\n\n".join(d.page_content for d in docs)


def with_ids(docs: list) -> str:
    return "\n".join(f"[{d.metadata['heaprank_id']}] {d.page_content}" for d in docs)


def _run(store: InMemoryVectorStore, formatter, usage: str = "citations"):
    engine = Reranker()
    retriever = HeapRankRetriever(vectorstore=store, state=engine, k=3, now=NOW)
    llm = FakeListChatModel(responses=[ANSWER] * len(QUESTIONS))
    chain = {"context": retriever | formatter, "question": RunnablePassthrough()} | PROMPT | llm \
        | StrOutputParser()
    handler = HeapRankFeedbackHandler(retriever, usage=usage)  # type: ignore[arg-type]
    for question in QUESTIONS:
        assert chain.invoke(question, config={"callbacks": [handler]}) == ANSWER
    return engine, handler


def _heaprank_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "langchain_heaprank" and r.levelno >= logging.WARNING]


def test_a_prompt_without_ids_records_nothing_and_warns_once_naming_the_fix(
        store: InMemoryVectorStore, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="langchain_heaprank"):
        engine, handler = _run(store, page_text_only)
    assert handler.skipped == len(QUESTIONS) and handler.failed == 0
    assert list(handler.reports) == []
    assert engine.stats()["feedbacks"] == 0 and engine.links("default") == []
    [message] = _heaprank_warnings(caplog)  # one per handler, not one per answer
    assert "no id" in message and "heaprank_id" in message and "skipped" in message


def test_a_prompt_with_ids_and_an_answer_citing_none_counts_every_document_ignored(
        store: InMemoryVectorStore, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="langchain_heaprank"):
        engine, handler = _run(store, with_ids)
    assert handler.skipped == 0 and engine.stats()["feedbacks"] == len(QUESTIONS)
    assert all(r.used == () and len(r.shown) == 3 for r in handler.reports)
    assert _heaprank_warnings(caplog) == []


def test_a_prompt_that_numbers_the_documents_shows_ids(store: InMemoryVectorStore) -> None:
    def numbered(docs: list) -> str:
        return "\n".join(f"[{i}] {d.page_content}" for i, d in enumerate(docs, start=1))

    engine, handler = _run(store, numbered)
    assert handler.skipped == 0 and engine.stats()["feedbacks"] == len(QUESTIONS)


def test_the_configured_overlap_fallback_is_used_instead_of_skipping(
        store: InMemoryVectorStore) -> None:
    engine, handler = _run(store, page_text_only, usage="citations+overlap")
    assert handler.skipped == 0 and engine.stats()["feedbacks"] == len(QUESTIONS)
    assert all(r.source == "citations+overlap" for r in handler.reports)
