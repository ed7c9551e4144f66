"""HeapRankRetriever: a BaseRetriever over real vector stores (InMemoryVectorStore, FAISS), BM25
and an EnsembleRetriever, in LCEL, sync and async."""

from __future__ import annotations

import asyncio
import pickle
import warnings
from pathlib import Path

import pytest
from heaprank import Config, Reranker, Scoring
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import ValidationError

from langchain_heaprank import HeapRankReranker, HeapRankRetriever
from lc_support import MEMORIES, NOW, HashedBagOfWords

QUERY = "When is my flight to Lisbon?"


def _explains(docs: list[Document]) -> dict[str, str]:
    return {str(d.id): d.metadata["heaprank_explain"] for d in docs}


def test_is_a_retriever() -> None:
    assert BaseRetriever in HeapRankRetriever.__mro__


def test_needs_exactly_one_source(store: InMemoryVectorStore) -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        HeapRankRetriever(state="memory://")
    with pytest.raises(ValidationError, match="exactly one"):
        HeapRankRetriever(base_retriever=store.as_retriever(), vectorstore=store, state="memory://")


def test_k_is_how_many_come_back_and_fetch_k_how_many_are_fetched(store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(vectorstore=store, state="memory://", now=NOW)
    assert len(hr.invoke(QUERY)) == 4  # LangChain's usual k
    assert len(HeapRankRetriever(vectorstore=store, state="memory://", k=2).invoke(QUERY)) == 2
    assert len(hr.invoke(QUERY, k=1)) == 1
    few = HeapRankRetriever(vectorstore=store, state="memory://", fetch_k=2, k=4)
    assert len(few.invoke(QUERY)) == 2  # only two candidates were fetched
    with pytest.raises(ValueError, match="k"):
        hr.invoke(QUERY, k=0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"top_n": 10}, "pass k="),
    ({"reranker": None}, "pass state="),
    ({"search_kwargs": {"k": 10}}, "fetch_k"),
    ({"k": 0}, "k: must be >= 1"),
    ({"topn": 3}, "topn"),
])
def test_how_many_settings_are_checked(store: InMemoryVectorStore, kwargs: dict, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        HeapRankRetriever(vectorstore=store, state="memory://", **kwargs)


def test_asks_a_vector_store_for_its_raw_scores(store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(base_retriever=store.as_retriever(search_kwargs={"k": 4}),
                           state="memory://", k=3, now=NOW)
    out = hr.invoke(QUERY)
    expected = dict((d.id, s) for d, s in store.similarity_search_with_score(QUERY, k=4))
    assert all(f"(score {expected[d.id]:.3g})" in d.metadata["heaprank_explain"] for d in out)
    assert all(d.metadata["retrieval_score"] == pytest.approx(expected[d.id]) for d in out)


def test_faiss_with_its_defaults_gives_no_relevance_score_warning() -> None:
    pytest.importorskip("faiss")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community is being sunset
        from langchain_community.vectorstores import FAISS
    store = FAISS.from_documents([d.model_copy() for d in MEMORIES], HashedBagOfWords(),
                                 ids=[d.id for d in MEMORIES])
    with warnings.catch_warnings(record=True) as control:
        warnings.simplefilter("always")
        store.similarity_search_with_relevance_scores(QUERY, k=4)
    assert any("Relevance scores must be between 0 and 1" in str(w.message) for w in control)
    hr = HeapRankRetriever(vectorstore=store, state="memory://", k=4, now=NOW)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = hr.invoke(QUERY)
        asyncio.run(hr.ainvoke(QUERY))
    assert [str(w.message) for w in seen] == []
    distance = {d.id: s for d, s in store.similarity_search_with_score(QUERY, k=4)}
    by_relevance = sorted(out, key=lambda d: -d.metadata["retrieval_score"])
    assert [d.id for d in by_relevance] == sorted(distance, key=distance.__getitem__)  # nearest first


def test_a_plain_retriever_is_ranked_by_its_order() -> None:
    plain = RunnableLambda(lambda q: [d.model_copy() for d in MEMORIES])
    out = HeapRankRetriever(base_retriever=plain, state="memory://", now=NOW).invoke(QUERY)
    explains = _explains(out)
    assert "(rank 1)" in explains["booked"] and "(rank 2)" in explains["wish"]


def _hybrid(texts: list[str]):
    bm25 = pytest.importorskip("langchain_community.retrievers").BM25Retriever
    ensemble = pytest.importorskip("langchain_classic.retrievers").EnsembleRetriever
    docs = [Document(t, id=f"t{i}") for i, t in enumerate(texts)]
    keyword = bm25.from_documents(docs, k=len(docs))
    vectors = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    vectors.add_documents(docs)
    return keyword, vectors, ensemble(retrievers=[keyword, vectors.as_retriever(
        search_kwargs={"k": len(docs)})], weights=[0.5, 0.5])


def test_bm25_and_vector_scores_of_an_ensemble_reach_fusion_weights() -> None:
    texts = ["the flight to Lisbon departs at nine", "Lisbon photos from the flight",
             "a flight flight flight log", "dentist on Tuesday", "lease renewal notes"]
    keyword, vectors, ensemble = _hybrid(texts)
    query = "flight to Lisbon"
    bm25_top = keyword.invoke(query)[0].id
    vector_top = vectors.similarity_search(query, k=1)[0].id
    assert bm25_top != vector_top  # the two retrievers disagree on this query
    for name, expected in (("bm25", bm25_top), ("vector", vector_top)):
        hr = HeapRankRetriever(base_retriever=ensemble, state="memory://", k=5, now=NOW,
                               config=Config(scoring=Scoring(fusion_weights={name: 50.0})))
        assert hr.invoke(query)[0].id == expected
        assert asyncio.run(hr.ainvoke(query))[0].id == expected


def test_a_bm25_retriever_gives_its_scores() -> None:
    keyword, _, _ = _hybrid(["flight to Lisbon", "Lisbon trip photos", "dentist appointment"])
    out = HeapRankRetriever(base_retriever=keyword, state="memory://", k=3, now=NOW).invoke("Lisbon")
    expected = dict(zip((d.id for d in keyword.docs),
                        keyword.vectorizer.get_scores(keyword.preprocess_func("Lisbon"))))
    assert all(d.metadata["retrieval_score"] == pytest.approx(expected[d.id]) for d in out)


def test_lcel_pipe_sync_and_async_agree(store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(base_retriever=store.as_retriever(search_kwargs={"k": 4}),
                           state="memory://", k=3, now=NOW, track=False)
    chain = hr | RunnableLambda(lambda docs: [d.id for d in docs])
    assert chain.invoke(QUERY) == asyncio.run(chain.ainvoke(QUERY))
    assert len(chain.invoke(QUERY)) == 3


def test_namespace_from_run_config_metadata(store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(vectorstore=store, state="memory://", now=NOW)
    out = hr.invoke(QUERY, config={"metadata": {"heaprank_namespace": "user:maya"}})
    hr.engine.feedback(out[0].metadata["heaprank_recall_id"], used=[out[0].metadata["heaprank_id"]])
    assert hr.engine.links("user:maya") and not hr.engine.links("default")
    out = hr.invoke(QUERY)
    hr.engine.feedback(out[0].metadata["heaprank_recall_id"], used=[])
    assert hr.engine.links("default")


def test_inside_contextual_compression_retriever(store: InMemoryVectorStore,
                                                 reranker: HeapRankReranker) -> None:
    classic = pytest.importorskip("langchain_classic.retrievers")
    ccr = classic.ContextualCompressionRetriever(
        base_compressor=reranker, base_retriever=store.as_retriever(search_kwargs={"k": 4}))
    out = ccr.invoke(QUERY)
    assert [d.metadata["heaprank_rank"] for d in out] == [1, 2, 3]
    assert [d.id for d in asyncio.run(ccr.ainvoke(QUERY))] == [d.id for d in out]


def test_inside_a_compressor_pipeline(store: InMemoryVectorStore, reranker: HeapRankReranker) -> None:
    compressors = pytest.importorskip("langchain_classic.retrievers.document_compressors")
    pipeline = compressors.DocumentCompressorPipeline(transformers=[reranker])
    assert len(pipeline.compress_documents(store.similarity_search(QUERY, k=4), QUERY)) == 3


def test_pickle_and_dump_keep_the_state(tmp_path: Path, store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(vectorstore=store, state=Reranker("sqlite:///r.db"), k=2, now=NOW)
    out = hr.invoke(QUERY)
    hr.engine.feedback(out[0].metadata["heaprank_recall_id"], used=[out[1].id])
    clone = pickle.loads(pickle.dumps(hr))
    assert clone.engine.links("default") == hr.engine.links("default") != []
    assert len(clone.invoke(QUERY)) == 2
    assert hr.model_dump()["state"].startswith(f"sqlite:///{tmp_path / 'r.db'}")
    assert {"state", "k", "fetch_k"} <= set(HeapRankRetriever.model_json_schema()["properties"])



def test_pickle_reopens_an_engine_s_redis_state(redis_url: str, store: InMemoryVectorStore) -> None:
    hr = HeapRankRetriever(vectorstore=store, state=Reranker(redis_url), k=2, now=NOW)
    out = hr.invoke(QUERY)
    hr.engine.feedback(out[0].metadata["heaprank_recall_id"], used=[out[1].id], namespace="default")
    clone = pickle.loads(pickle.dumps(hr))
    assert clone.engine is not hr.engine and clone.engine.state.layout.prefix in redis_url
    assert clone.engine.links("default") == hr.engine.links("default") != []
    assert len(clone.invoke(QUERY)) == 2 and hr.engine.stats()["impressions"] == 2

class TestStandardRetriever(RetrieversIntegrationTests):
    """langchain-tests' own conformance suite (it runs offline)."""

    @property
    def retriever_constructor(self) -> type[HeapRankRetriever]:
        return HeapRankRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        vs = InMemoryVectorStore(HashedBagOfWords())
        vs.add_documents([Document(d.page_content, id=d.id, metadata=dict(d.metadata)) for d in MEMORIES])
        return {"vectorstore": vs, "state": "memory://", "k": 3}

    @property
    def retriever_query_example(self) -> str:
        return QUERY
