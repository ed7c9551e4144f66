"""An answer that cites nothing, after a prompt that showed the model no id to cite (the default
query and chat prompts), teaches nothing: with ``usage="citations"`` it is skipped
(``handler.skipped``), never recorded as "every source node was ignored", and the handler says
once what to change; by default (``"citations+coverage"``) the answer's own words find the node
it used, or the handler abstains."""

from __future__ import annotations

import logging

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.query_engine import CitationQueryEngine

from li_support import NOW, CitingLLM
from llama_index.postprocessor.heaprank import (
    HeapRankFeedbackHandler,
    HeapRankPostprocessor,
    citation_qa_template,
)

QUERIES = ["When is my flight to Lisbon?", "When do I fly to Lisbon?", "What time is my flight?"]
ANSWER = "It departs March 14 at 9:40."


def _ask(engine, streaming: bool) -> None:
    for query in QUERIES:
        response = engine.query(query)
        text = "".join(response.response_gen) if streaming else str(response)
        assert text == ANSWER


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "llama_index.postprocessor.heaprank" and r.levelno >= logging.WARNING]


@pytest.mark.parametrize("streaming", [False, True])
def test_the_default_prompt_records_nothing_and_warns_once_naming_the_fix(
        index: VectorStoreIndex, streaming: bool, caplog: pytest.LogCaptureFixture) -> None:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW)
    handler = HeapRankFeedbackHandler(pp, usage="citations").install()
    llm = CitingLLM(prompts=[], answer=ANSWER)
    try:
        with caplog.at_level(logging.WARNING, logger="llama_index.postprocessor.heaprank"):
            _ask(index.as_query_engine(llm=llm, similarity_top_k=4, node_postprocessors=[pp],
                                       streaming=streaming), streaming)
    finally:
        handler.uninstall()
    assert handler.skipped == len(QUERIES) and handler.failed == 0 and handler.reports == []
    assert pp.engine.stats()["feedbacks"] == 0 and pp.engine.links("default") == []
    [message] = _warnings(caplog)
    assert "no id" in message and "citations=True" in message and "citation_qa_template" in message


def test_citations_shown_and_an_answer_citing_none_counts_every_node_ignored(
        index: VectorStoreIndex, caplog: pytest.LogCaptureFixture) -> None:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW, citations=True)
    handler = HeapRankFeedbackHandler(pp, usage="citations").install()
    llm = CitingLLM(prompts=[], answer=ANSWER)
    try:
        with caplog.at_level(logging.WARNING, logger="llama_index.postprocessor.heaprank"):
            _ask(index.as_query_engine(llm=llm, similarity_top_k=4, node_postprocessors=[pp],
                                       text_qa_template=citation_qa_template()), False)
    finally:
        handler.uninstall()
    assert handler.skipped == 0 and pp.engine.stats()["feedbacks"] == len(QUERIES)
    assert all(r.used == () and len(r.shown) == 3 for r in handler.reports)
    assert _warnings(caplog) == []


def test_by_default_an_uncited_answer_is_attributed_by_its_coverage_or_not_at_all(
        index: VectorStoreIndex) -> None:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW)
    handler = HeapRankFeedbackHandler(pp).install()
    try:
        _ask(index.as_query_engine(llm=CitingLLM(prompts=[], answer=ANSWER), similarity_top_k=4,
                                   node_postprocessors=[pp]), False)
        index.as_query_engine(llm=CitingLLM(prompts=[], answer="I cannot say."),
                              similarity_top_k=4, node_postprocessors=[pp]).query(QUERIES[0])
    finally:
        handler.uninstall()
    # "March 14 at 9:40" is the booking's: found without a citation
    assert [len(r.used) for r in handler.reports] == [1, 1, 1]
    assert all(r.source == "citations+coverage" for r in handler.reports)
    # nothing cited, nothing covered: no feedback, never "every node was ignored"
    assert handler.abstained == 1 and pp.engine.stats()["feedbacks"] == len(QUERIES)


def test_citation_query_engine_numbers_its_sources_itself(index: VectorStoreIndex) -> None:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW)
    handler = HeapRankFeedbackHandler(pp).install()
    try:
        engine = CitationQueryEngine.from_args(index, llm=CitingLLM(prompts=[], answer=ANSWER),
                                               similarity_top_k=4, node_postprocessors=[pp])
        _ask(engine, False)
    finally:
        handler.uninstall()
    assert handler.skipped == 0 and pp.engine.stats()["feedbacks"] == len(QUERIES)


def test_the_configured_overlap_fallback_is_used_instead_of_skipping(index: VectorStoreIndex) -> None:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW)
    handler = HeapRankFeedbackHandler(pp, usage="citations+overlap").install()
    try:
        _ask(index.as_query_engine(llm=CitingLLM(prompts=[], answer=ANSWER), similarity_top_k=4,
                                   node_postprocessors=[pp]), False)
    finally:
        handler.uninstall()
    assert handler.skipped == 0 and pp.engine.stats()["feedbacks"] == len(QUERIES)
