"""One postprocessor serves many users: the namespace of one call is a keyword of
``postprocess_nodes`` / ``apostprocess_nodes``, or the instrument tag ``heaprank_namespace``
around a query engine's call; the feedback handler then writes in that namespace."""

from __future__ import annotations

import asyncio

import pytest
from heaprank import FeedbackError
from llama_index.core import VectorStoreIndex
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.schema import NodeWithScore, QueryBundle

from li_support import NOW, CitingLLM
from llama_index.postprocessor.heaprank import HeapRankFeedbackHandler, HeapRankPostprocessor

QUERY = "When is my flight to Lisbon?"


def _retrieve(index: VectorStoreIndex) -> list[NodeWithScore]:
    return index.as_retriever(similarity_top_k=4).retrieve(QUERY)


def _recall(nodes: list[NodeWithScore]) -> tuple[str, str]:
    meta = nodes[0].node.metadata
    return meta["heaprank_recall_id"], meta["heaprank_id"]


@pytest.mark.parametrize("use_async", [False, True])
def test_namespace_per_call_is_where_the_impression_and_its_feedback_go(
        index: VectorStoreIndex, postprocessor: HeapRankPostprocessor, use_async: bool) -> None:
    nodes = _retrieve(index)
    out = asyncio.run(postprocessor.apostprocess_nodes(nodes, QueryBundle(QUERY), namespace="user:x")) \
        if use_async else postprocessor.postprocess_nodes(nodes, query_str=QUERY, namespace="user:x")
    recall_id, first = _recall(out)
    assert out[0].node.metadata["heaprank_namespace"] == "user:x"
    with pytest.raises(FeedbackError):
        postprocessor.engine.feedback(recall_id, used=[first], namespace="default")
    postprocessor.engine.feedback(recall_id, used=[first], namespace="user:x")
    assert postprocessor.engine.links("user:x") and not postprocessor.engine.links("default")


def test_the_call_keyword_wins_over_the_instrument_tag(index: VectorStoreIndex,
                                                       postprocessor: HeapRankPostprocessor) -> None:
    with instrument_tags({"heaprank_namespace": "user:maya"}):
        tagged = postprocessor.postprocess_nodes(_retrieve(index), query_str=QUERY)
        keyword = postprocessor.postprocess_nodes(_retrieve(index), query_str=QUERY,
                                                  namespace="user:x")
    assert tagged[0].node.metadata["heaprank_namespace"] == "user:maya"
    assert keyword[0].node.metadata["heaprank_namespace"] == "user:x"


def test_a_query_engine_call_in_a_tag_records_its_feedback_in_that_namespace(
        index: VectorStoreIndex) -> None:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW, citations=True)
    handler = HeapRankFeedbackHandler(pp).install()
    engine = index.as_query_engine(llm=CitingLLM(prompts=[], answer="[1]"), similarity_top_k=4,
                                   node_postprocessors=[pp])
    try:
        with instrument_tags({"heaprank_namespace": "user:x"}):
            engine.query(QUERY)
    finally:
        handler.uninstall()
    [report] = handler.reports
    assert report.namespace == "user:x" and set(report.recorded) == set(report.shown)
    assert pp.engine.links("user:x") and not pp.engine.links("default")


@pytest.mark.parametrize("bad", ["", 7, "*"])
def test_a_namespace_per_call_that_is_not_a_name_is_refused(
        index: VectorStoreIndex, postprocessor: HeapRankPostprocessor, bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="namespace"):
        postprocessor.postprocess_nodes(_retrieve(index), query_str=QUERY, namespace=bad)
    assert postprocessor.engine.stats()["impressions"] == 0


def test_an_unknown_call_keyword_is_a_type_error_naming_it(
        index: VectorStoreIndex, postprocessor: HeapRankPostprocessor) -> None:
    with pytest.raises(TypeError, match="top_n"):
        postprocessor.postprocess_nodes(_retrieve(index), query_str=QUERY, top_n=2)
