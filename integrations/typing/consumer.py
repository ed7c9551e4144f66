"""An application's use of heaprank and its two framework packages, type-checked as installed.

``make typecheck-consumer`` runs ``mypy --strict`` on this file from this folder: each import must
resolve to an installed package with its types (``py.typed``), and the public signatures must
accept what an application passes.
"""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_heaprank import FeedbackReport as LangChainReport
from langchain_heaprank import HeapRankFeedbackHandler as LangChainHandler
from langchain_heaprank import HeapRankReranker, HeapRankRetriever
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.heaprank import FeedbackReport as LlamaIndexReport
from llama_index.postprocessor.heaprank import HeapRankFeedbackHandler as LlamaIndexHandler
from llama_index.postprocessor.heaprank import HeapRankPostprocessor, citation_qa_template

from heaprank import Config, Ranking, Reranker, Scoring


def rank_with_the_core(engine: Reranker) -> Ranking:
    ranking = engine.rerank("When is my flight?", [{"id": "a", "text": "Flight on March 14"}], k=1)
    engine.feedback(ranking.recall_id, used=[ranking[0].id])
    return ranking


def langchain_parts(store: InMemoryVectorStore) -> tuple[HeapRankRetriever, LangChainHandler]:
    retriever = HeapRankRetriever(vectorstore=store, state="memory://", k=3, namespace="user:maya",
                                  config=Config(scoring=Scoring(fusion_weights={"bm25": 1.0})))
    compressor = HeapRankReranker(state=retriever.engine, top_n=2)
    docs: list[Document] = compressor.rank_documents([Document("Flight on March 14")], "flight",
                                                     namespace="user:ali")
    score: float = docs[0].metadata["relevance_score"]
    assert 0.0 <= score <= 1.0
    handler = LangChainHandler(retriever, usage="citations")
    reports: list[LangChainReport] = handler.reports  # one shape in both packages: a list
    skipped: int = handler.skipped
    assert not reports and skipped == 0
    return retriever, handler


async def close_langchain(retriever: HeapRankRetriever, reranker: HeapRankReranker) -> None:
    await retriever.aclose()
    reranker.close()


def llamaindex_parts() -> tuple[HeapRankPostprocessor, LlamaIndexHandler]:
    pp = HeapRankPostprocessor(state="memory://", top_n=3, citations=True)
    nodes = pp.postprocess_nodes([NodeWithScore(node=TextNode(text="Flight on March 14"), score=0.8)],
                                 query_str="When is my flight?", namespace="user:ali")
    best: float | None = nodes[0].score
    assert best == 1.0 and citation_qa_template().template
    handler = LlamaIndexHandler(pp, usage="explicit")
    reports: list[LlamaIndexReport] = handler.reports
    skipped: int = handler.skipped
    assert not reports and skipped == 0
    return pp, handler


async def close_llamaindex(pp: HeapRankPostprocessor) -> None:
    await pp.aclose()
    pp.close()
