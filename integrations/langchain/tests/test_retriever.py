"""HeapRankRetriever: a BaseRetriever over a real InMemoryVectorStore, in LCEL, sync and async."""

from __future__ import annotations

import asyncio

import pytest
from heaprank import Reranker
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import ValidationError

from langchain_heaprank import HeapRankReranker, HeapRankRetriever
from lc_support import MEMORIES, NOW, HashedBagOfWords

QUERY = "When is my flight to Lisbon?"


def test_is_a_retriever() -> None:
    assert BaseRetriever in HeapRankRetriever.__mro__


def test_needs_exactly_one_source(store: InMemoryVectorStore) -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        HeapRankRetriever()
    with pytest.raises(ValidationError, match="exactly one"):
        HeapRankRetriever(base_retriever=store.as_retriever(), vectorstore=store)


def test_asks_a_vector_store_retriever_for_scores(store: InMemoryVectorStore,
                                                  reranker: HeapRankReranker) -> None:
    hr = HeapRankRetriever(base_retriever=store.as_retriever(search_kwargs={"k": 4}), reranker=reranker)
    out = hr.invoke(QUERY)
    assert len(out) == 3
    assert all("(score " in d.metadata["heaprank_explain"] for d in out)
    expected = dict((d.id, s) for d, s in store.similarity_search_with_score(QUERY, k=4))
    assert all(f"score {expected[d.id]:.4g}" in d.metadata["heaprank_explain"] for d in out)


def test_a_plain_retriever_is_ranked_by_its_order(reranker: HeapRankReranker) -> None:
    plain = RunnableLambda(lambda q: [d.model_copy() for d in MEMORIES])
    out = HeapRankRetriever(base_retriever=plain, reranker=reranker.model_copy(update={"top_n": 4})) \
        .invoke(QUERY)
    explains = {d.id: d.metadata["heaprank_explain"] for d in out}
    assert "(rank 1)" in explains["booked"] and "(rank 2)" in explains["wish"]


def test_vectorstore_and_k_kwarg(store: InMemoryVectorStore, reranker: HeapRankReranker) -> None:
    hr = HeapRankRetriever(vectorstore=store, search_kwargs={"k": 4}, reranker=reranker)
    assert len(hr.invoke(QUERY)) == 3
    assert len(hr.invoke(QUERY, k=1)) == 1
    assert len(HeapRankRetriever(vectorstore=store, reranker=reranker, k=2).invoke(QUERY)) == 2


def test_lcel_pipe_sync_and_async_agree(store: InMemoryVectorStore, reranker: HeapRankReranker) -> None:
    hr = HeapRankRetriever(base_retriever=store.as_retriever(search_kwargs={"k": 4}),
                           reranker=reranker.model_copy(update={"track": False}))
    chain = hr | RunnableLambda(lambda docs: [d.id for d in docs])
    assert chain.invoke(QUERY) == asyncio.run(chain.ainvoke(QUERY))
    assert len(chain.invoke(QUERY)) == 3


def test_namespace_from_run_config_metadata(store: InMemoryVectorStore) -> None:
    engine = Reranker()
    hr = HeapRankRetriever(vectorstore=store, reranker=HeapRankReranker(reranker=engine, now=NOW))
    out = hr.invoke(QUERY, config={"metadata": {"heaprank_namespace": "user:maya"}})
    engine.feedback(out[0].metadata["heaprank_recall_id"], used=[out[0].metadata["heaprank_id"]])
    assert engine.links("user:maya")
    assert not engine.links("default")
    out = hr.invoke(QUERY)
    engine.feedback(out[0].metadata["heaprank_recall_id"], used=[])
    assert engine.links("default")


def test_inside_contextual_compression_retriever(store: InMemoryVectorStore,
                                                 reranker: HeapRankReranker) -> None:
    classic = pytest.importorskip("langchain_classic.retrievers")
    ccr = classic.ContextualCompressionRetriever(
        base_compressor=reranker, base_retriever=store.as_retriever(search_kwargs={"k": 4}))
    out = ccr.invoke(QUERY)
    assert [d.metadata["heaprank_rank"] for d in out] == [1, 2, 3]
    out_async = asyncio.run(ccr.ainvoke(QUERY))
    assert [d.id for d in out_async] == [d.id for d in out]


def test_inside_a_compressor_pipeline(store: InMemoryVectorStore, reranker: HeapRankReranker) -> None:
    compressors = pytest.importorskip("langchain_classic.retrievers.document_compressors")
    pipeline = compressors.DocumentCompressorPipeline(transformers=[reranker])
    docs = store.similarity_search(QUERY, k=4)
    assert len(pipeline.compress_documents(docs, QUERY)) == 3


class TestStandardRetriever(RetrieversIntegrationTests):
    """langchain-tests' own conformance suite (it runs offline)."""

    @property
    def retriever_constructor(self) -> type[HeapRankRetriever]:
        return HeapRankRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        vs = InMemoryVectorStore(HashedBagOfWords())
        vs.add_documents([Document(d.page_content, id=d.id, metadata=dict(d.metadata)) for d in MEMORIES])
        return {"vectorstore": vs, "reranker": HeapRankReranker(reranker=Reranker(), top_n=3)}

    @property
    def retriever_query_example(self) -> str:
        return QUERY
