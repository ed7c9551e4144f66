"""HeapRankPostprocessor on a real VectorStoreIndex and query engine."""

from __future__ import annotations

import asyncio
import logging
import pickle
from pathlib import Path

import pytest
from heaprank import Config, ConfigError, InputError, InputTypeError, Reranker, Scoring
from llama_index.core import VectorStoreIndex
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from pydantic import ValidationError

from li_support import NOW, CitingLLM, HashedBagOfWords, NeedleCitingLLM, memories
from llama_index.postprocessor.heaprank import (
    HeapRankFeedbackHandler,
    HeapRankPostprocessor,
    StateMismatchWarning,
    citation_qa_template,
)

QUERY = "When is my flight to Lisbon?"


def _retrieve(index: VectorStoreIndex, k: int = 4) -> list[NodeWithScore]:
    return index.as_retriever(similarity_top_k=k).retrieve(QUERY)


def test_class() -> None:
    assert BaseNodePostprocessor in HeapRankPostprocessor.__mro__
    assert HeapRankPostprocessor.class_name() == "HeapRankPostprocessor"


def test_query_engine_gets_reranked_nodes_with_final_scores(index: VectorStoreIndex, llm: CitingLLM,
                                                            postprocessor: HeapRankPostprocessor) -> None:
    engine = index.as_query_engine(llm=llm, similarity_top_k=4, node_postprocessors=[postprocessor])
    response = engine.query(QUERY)
    nodes = response.source_nodes
    assert len(nodes) == 3
    scores = [n.score for n in nodes]
    raw = [n.node.metadata["heaprank_score"] for n in nodes]
    assert scores[0] == 1.0 and scores == sorted(scores, reverse=True) and min(scores) >= 0.0
    assert scores == pytest.approx([r / raw[0] for r in raw])
    assert [n.node.metadata["heaprank_rank"] for n in nodes] == [1, 2, 3]
    assert all(n.node.metadata["heaprank_explain"].startswith("rel ") for n in nodes)
    assert len({n.node.metadata["heaprank_recall_id"] for n in nodes}) == 1


def test_explain_is_hidden_from_the_llm_and_the_embedding(index: VectorStoreIndex, llm: CitingLLM,
                                                          postprocessor: HeapRankPostprocessor) -> None:
    engine = index.as_query_engine(llm=llm, similarity_top_k=4, node_postprocessors=[postprocessor])
    node = engine.query(QUERY).source_nodes[0].node
    assert "heaprank" not in node.get_content(MetadataMode.LLM)
    assert "heaprank" not in node.get_content(MetadataMode.EMBED)
    assert "kind: " in llm.prompts[-1] and "heaprank" not in llm.prompts[-1]


def test_standalone_and_edge_cases(index: VectorStoreIndex, postprocessor: HeapRankPostprocessor) -> None:
    nodes = _retrieve(index)
    assert len(postprocessor.postprocess_nodes(nodes, query_str=QUERY)) == 3
    assert postprocessor.postprocess_nodes([], query_str=QUERY) == []
    with pytest.raises(ValueError, match="query_bundle"):
        postprocessor.postprocess_nodes(nodes)
    everything = postprocessor.model_copy(update={"top_n": None})
    assert len(everything.postprocess_nodes(nodes, query_str=QUERY)) == 4


def test_the_incoming_score_is_kept_and_read_back_by_a_later_heaprank(
        index: VectorStoreIndex, postprocessor: HeapRankPostprocessor) -> None:
    nodes = _retrieve(index)
    by_id = {n.node.node_id: n.score for n in nodes}
    first = postprocessor.postprocess_nodes(nodes, query_str=QUERY)
    for n in first:
        assert n.node.metadata["retrieval_score"] == by_id[n.node.node_id]
        assert {"retrieval_score", "heaprank_score"} <= set(n.node.excluded_llm_metadata_keys)
    again = postprocessor.postprocess_nodes(list(reversed(first)), query_str=QUERY)
    for n in again:  # the retriever's scores, not heaprank's 1.0, 0.x, ...
        assert n.node.metadata["retrieval_score"] == by_id[n.node.node_id]
        assert f"(score {by_id[n.node.node_id]:.3g})" in n.node.metadata["heaprank_explain"]


def test_a_similarity_cutoff_downstream_keeps_heaprank_s_best(index: VectorStoreIndex,
                                                              postprocessor: HeapRankPostprocessor) -> None:
    out = postprocessor.postprocess_nodes(_retrieve(index), query_str=QUERY)
    assert max(n.node.metadata["heaprank_score"] for n in out) < 0.7  # raw products: all dropped
    kept = SimilarityPostprocessor(similarity_cutoff=0.7).postprocess_nodes(out, query_str=QUERY)
    assert kept and kept[0].node.node_id == out[0].node.node_id


def test_a_kept_retrieval_score_reaches_fusion_weights(postprocessor: HeapRankPostprocessor) -> None:
    def nodes() -> list[NodeWithScore]:  # as after a reranker that kept the retrieval score
        return [NodeWithScore(node=TextNode(text=f"note {c} about flights", id_=c,
                                            metadata={"retrieval_score": r}), score=s)
                for c, s, r in (("a", 0.9, 0.1), ("b", 0.5, 0.8), ("c", 0.2, 0.5))]

    plain = postprocessor.postprocess_nodes(nodes(), query_str="flights")
    assert [n.node.node_id for n in plain] == ["a", "b", "c"]
    fused = HeapRankPostprocessor(
        state="memory://", now=NOW, config=Config(scoring=Scoring(fusion_weights={"retrieval": 50.0}))
    ).postprocess_nodes(nodes(), query_str="flights")
    assert [n.node.node_id for n in fused] == ["b", "c", "a"]


def test_source_nodes_are_not_mutated(index: VectorStoreIndex, postprocessor: HeapRankPostprocessor) -> None:
    nodes = _retrieve(index)
    before = [(dict(n.node.metadata), n.score, list(n.node.excluded_llm_metadata_keys)) for n in nodes]
    postprocessor.postprocess_nodes(nodes, query_str=QUERY)
    assert [(dict(n.node.metadata), n.score, list(n.node.excluded_llm_metadata_keys))
            for n in nodes] == before


def test_ids_survive_reindexing(postprocessor: HeapRankPostprocessor) -> None:
    first = VectorStoreIndex.from_documents(memories(), embed_model=HashedBagOfWords())
    second = VectorStoreIndex.from_documents(memories(), embed_model=HashedBagOfWords())
    a, b = _retrieve(first), _retrieve(second)
    assert {n.node.node_id for n in a}.isdisjoint({n.node.node_id for n in b})
    ids = [{n.node.metadata["heaprank_id"] for n in postprocessor.postprocess_nodes(x, query_str=QUERY)}
           for x in (a, b)]
    assert ids[0] == ids[1]
    assert all(i.split("#")[0] in {"booked", "wish", "price", "dentist"} for i in ids[0])


def test_relevance_from_node_scores(postprocessor: HeapRankPostprocessor) -> None:
    same = {"kind": "fact", "created_at": NOW - 86_400}
    nodes = [NodeWithScore(node=TextNode(text="alpha", id_="a", metadata=dict(same)), score=0.1),
             NodeWithScore(node=TextNode(text="beta", id_="b", metadata=dict(same)), score=0.9)]
    out = postprocessor.postprocess_nodes(nodes, query_str="text")
    assert [n.node.node_id for n in out] == ["b", "a"]
    unscored = [NodeWithScore(node=n.node, score=None) for n in nodes]
    out = postprocessor.postprocess_nodes(unscored, query_str="text")
    assert [n.node.node_id for n in out] == ["a", "b"]
    assert "(rank 1)" in out[0].node.metadata["heaprank_explain"]


def test_async_is_native_and_agrees_with_sync(index: VectorStoreIndex,
                                              postprocessor: HeapRankPostprocessor) -> None:
    assert HeapRankPostprocessor._apostprocess_nodes is not BaseNodePostprocessor._apostprocess_nodes
    pp = postprocessor.model_copy(update={"track": False})
    nodes = _retrieve(index)
    sync = pp.postprocess_nodes(nodes, query_bundle=QueryBundle(QUERY))
    asyn = asyncio.run(pp.apostprocess_nodes(nodes, query_bundle=QueryBundle(QUERY)))
    assert [(n.node.node_id, n.score) for n in sync] == [(n.node.node_id, n.score) for n in asyn]


def test_bad_metadata_is_neutralised_flagged_and_logged(postprocessor: HeapRankPostprocessor,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    nodes = [NodeWithScore(node=TextNode(text="one", id_="x", metadata={
        "kind": ["list"], "created_at": "someday", "__last_accessed__": float("nan")}), score=0.5)]
    with caplog.at_level(logging.WARNING, logger="llama_index.postprocessor.heaprank"):
        out = postprocessor.postprocess_nodes(nodes, query_str="one")
    explain = out[0].node.metadata["heaprank_explain"]
    assert "kind not str (list)" in explain
    assert "created_at unparsable" in explain
    assert caplog.records
    strict = HeapRankPostprocessor(state="memory://", strict=True, now=NOW)
    with pytest.raises((InputError, InputTypeError), match=r"metadata\.(kind|created_at)"):
        strict.postprocess_nodes(nodes, query_str="one")


def test_namespace_from_instrument_tags(index: VectorStoreIndex,
                                        postprocessor: HeapRankPostprocessor) -> None:
    with instrument_tags({"heaprank_namespace": "user:maya"}):
        out = postprocessor.postprocess_nodes(_retrieve(index), query_str=QUERY)
    postprocessor.engine.feedback(out[0].node.metadata["heaprank_recall_id"], used=[])
    assert postprocessor.engine.links("user:maya")
    assert not postprocessor.engine.links("default")


def _learn(pp: HeapRankPostprocessor, index: VectorStoreIndex) -> None:
    out = pp.postprocess_nodes(_retrieve(index), query_str=QUERY)
    pp.engine.feedback(out[0].node.metadata["heaprank_recall_id"],
                       used=[out[-1].node.metadata["heaprank_id"]])


def test_pickle_keeps_a_working_persistent_state(tmp_path: Path, index: VectorStoreIndex) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    pp = HeapRankPostprocessor(state=Reranker(url), top_n=3, now=NOW)
    _learn(pp, index)
    clone = pickle.loads(pickle.dumps(pp))
    assert clone.state == pp.state and clone.top_n == 3 and clone.engine is not pp.engine
    assert clone.engine.links("default") == pp.engine.links("default")
    _learn(clone, index)  # the clone writes to the same file
    assert Reranker(url).links("default") == clone.engine.links("default") != []
    assert pp.engine.stats()["feedbacks"] == 2


def test_to_dict_from_dict_round_trip(tmp_path: Path, index: VectorStoreIndex) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    pp = HeapRankPostprocessor(state=url, top_n=2, metadata_keys={"created_at": "ts"}, now=NOW)
    _learn(pp, index)
    data = pp.to_dict()
    assert data["class_name"] == "HeapRankPostprocessor" and "reranker" not in data
    clone = HeapRankPostprocessor.from_dict(data)
    assert clone.metadata_keys["created_at"] == "ts" and clone.top_n == 2
    assert clone.engine.links("default") == pp.engine.links("default") != []
    assert HeapRankPostprocessor.from_json(pp.to_json()).engine.stats() == pp.engine.stats()


def test_model_json_schema_builds() -> None:
    schema = HeapRankPostprocessor.model_json_schema()["properties"]
    assert schema["state"]["anyOf"] == [{"type": "string"}, {"type": "null"}]


def test_an_in_memory_state_refuses_to_pickle_rather_than_lose_its_learning() -> None:
    with pytest.raises(ConfigError, match="sqlite"):
        pickle.dumps(HeapRankPostprocessor(state="memory://"))


def test_unknown_metadata_field_is_named() -> None:
    with pytest.raises(ValueError, match="when"):
        HeapRankPostprocessor(state="memory://", metadata_keys={"when": "ts"})


@pytest.mark.parametrize("keyword", ["model", "topn"])
def test_unknown_keywords_are_rejected(keyword: str) -> None:
    with pytest.raises(ValidationError, match=keyword):
        HeapRankPostprocessor(state="memory://", **{keyword: "x"})


@pytest.mark.parametrize(("keyword", "hint"), [("top_k", "top_n="), ("state_url", "state="),
                                               ("reranker", "state="),
                                               ("keep_retrieval_score", "always kept")])
def test_names_of_other_postprocessors_say_what_to_pass(keyword: str, hint: str) -> None:
    with pytest.raises(TypeError, match=hint):
        HeapRankPostprocessor(**{keyword: 3})


def test_default_state_is_the_sqlite_file_the_cli_reads(tmp_path: Path, index: VectorStoreIndex) -> None:
    pp = HeapRankPostprocessor(now=NOW)
    assert pp.state == f"sqlite:///{tmp_path / 'heaprank.db'}"
    _learn(pp, index)
    pp.engine.close()
    assert HeapRankPostprocessor().engine.stats()["feedbacks"] == 1


def test_default_state_follows_heaprank_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEAPRANK_STATE", "sqlite:///elsewhere.db")
    assert HeapRankPostprocessor().state == f"sqlite:///{tmp_path / 'elsewhere.db'}"


def test_citations_with_the_default_query_engine(index: VectorStoreIndex) -> None:
    llm = NeedleCitingLLM(prompts=[])
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW, citations=True)
    handler = HeapRankFeedbackHandler(pp).install()
    try:
        engine = index.as_query_engine(llm=llm, similarity_top_k=4, node_postprocessors=[pp],
                                       text_qa_template=citation_qa_template())
        response = engine.query(QUERY)
    finally:
        handler.uninstall()
    prompt = llm.prompts[-1]
    assert "citation: [1]" in prompt and "Cite the sources" in prompt
    booked = next(n for n in response.source_nodes if "March 14" in n.node.get_content())
    [report] = handler.reports
    assert report.used == (booked.node.metadata["heaprank_id"],)
    assert "citation" not in booked.node.get_content(MetadataMode.EMBED)


def test_the_default_prompt_shows_no_ids_and_citation_query_engine_does(index: VectorStoreIndex) -> None:
    llm = NeedleCitingLLM(prompts=[])
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW)
    handler = HeapRankFeedbackHandler(pp, usage="citations").install()
    try:
        index.as_query_engine(llm=llm, similarity_top_k=4, node_postprocessors=[pp]).query(QUERY)
        assert "[1]" not in llm.prompts[-1]
        assert handler.reports == [] and handler.skipped == 1  # no id shown: nothing learned
        engine = CitationQueryEngine.from_args(index, llm=llm, similarity_top_k=4,
                                               node_postprocessors=[pp])
        response = engine.query(QUERY)
    finally:
        handler.uninstall()
    booked = next(n for n in response.source_nodes if "March 14" in n.node.get_content())
    assert handler.reports[-1].used == (booked.node.metadata["heaprank_id"],)


def test_citations_with_a_context_chat_engine(index: VectorStoreIndex) -> None:
    llm = NeedleCitingLLM(prompts=[])
    pp = HeapRankPostprocessor(state="memory://", top_n=3, now=NOW, citations=True)
    handler = HeapRankFeedbackHandler(pp).install()
    try:
        chat = index.as_chat_engine(chat_mode="context", llm=llm, node_postprocessors=[pp],
                                    similarity_top_k=4,
                                    system_prompt="Cite the sources you use as [n].")
        response = chat.chat(QUERY)
    finally:
        handler.uninstall()
    assert "citation: [1]" in llm.prompts[-1]
    booked = next(n for n in response.source_nodes if "March 14" in n.node.get_content())
    assert handler.reports[-1].used == (booked.node.metadata["heaprank_id"],)


def test_pickle_and_to_dict_reopen_a_redis_state(redis_url: str, index: VectorStoreIndex) -> None:
    pp = HeapRankPostprocessor(state=redis_url, top_n=3, now=NOW)
    _learn(pp, index)
    for clone in (pickle.loads(pickle.dumps(pp)), HeapRankPostprocessor.from_dict(pp.to_dict())):
        assert clone.state == pp.state and clone.engine is not pp.engine
        assert clone.engine.links("default") == pp.engine.links("default") != []
    _learn(clone, index)  # a copy writes to the same server
    assert pp.engine.stats()["feedbacks"] == 2


def test_a_query_with_no_content_words_logs_no_warning_per_node(
        index: VectorStoreIndex, postprocessor: HeapRankPostprocessor,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="llama_index.postprocessor.heaprank"):
        out = postprocessor.postprocess_nodes(_retrieve(index), query_str="when")
    assert "query has no content words" in out[0].node.metadata["heaprank_explain"]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_state_mismatch_warning_points_at_the_caller_s_line() -> None:
    handler = HeapRankFeedbackHandler(Reranker()).install()  # another in-memory state
    try:
        with pytest.warns(StateMismatchWarning) as seen:
            HeapRankPostprocessor(state="memory://")
    finally:
        handler.uninstall()
    assert [w.filename for w in seen] == [__file__]
