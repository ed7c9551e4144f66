"""Learned state hangs on a key that survives re-indexing: a document without an id of its own
is keyed by its content, not by the random UUID a vector store gives it (FAISS and
InMemoryVectorStore make new ones on every build)."""

from __future__ import annotations

import uuid
import warnings

import pytest
from heaprank import Config, Scoring
from heaprank.config import RECENCY_EVERY_QUESTION
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_heaprank import HeapRankFeedbackHandler, HeapRankRetriever
from lc_support import MEMORIES, NOW, HashedBagOfWords

QUERY = "When is my flight to Lisbon?"


def _without_ids() -> list[Document]:
    return [Document(d.page_content, metadata=dict(d.metadata)) for d in MEMORIES]


def _faiss(docs: list[Document]):
    pytest.importorskip("faiss")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community is being sunset
        from langchain_community.vectorstores import FAISS
    return FAISS.from_documents(docs, HashedBagOfWords())


@pytest.mark.parametrize("build", [_faiss, lambda docs: InMemoryVectorStore.from_documents(
    docs, HashedBagOfWords())], ids=["faiss", "in-memory"])
def test_a_rebuilt_store_gives_the_same_keys_and_the_learning_follows(build) -> None:
    first, second = build(_without_ids()), build(_without_ids())
    hr = HeapRankRetriever(vectorstore=first, state="memory://", k=4, now=NOW,
                           # recency on every question: shows use counts
                           config=Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION)))
    handler = HeapRankFeedbackHandler(hr, usage="explicit")
    run_id = uuid.uuid4()
    before = RunnableLambda(hr.invoke).invoke(QUERY, config={"callbacks": [handler],
                                                             "run_id": run_id})
    store_ids = {d.id for d in before}
    assert all(store_ids) and len(store_ids) == 4  # the store gave each one a random id
    keys = {d.page_content: d.metadata["heaprank_id"] for d in before}
    assert not store_ids & set(keys.values())
    booked = next(d for d in before if "Booked" in d.page_content)
    [report] = handler.feedback(run_id, used=[booked.id])  # the store's id still names it
    assert report.used == (booked.metadata["heaprank_id"],)

    rebuilt = hr.model_copy(update={"vectorstore": second}).invoke(QUERY)
    assert {d.id for d in rebuilt}.isdisjoint(store_ids)  # new random ids on the rebuild
    assert {d.page_content: d.metadata["heaprank_id"] for d in rebuilt} == keys
    again = next(d for d in rebuilt if "Booked" in d.page_content)
    assert "used 1x" in again.metadata["heaprank_explain"]  # its use count found it


def test_an_id_of_the_document_s_own_is_kept() -> None:
    store = InMemoryVectorStore.from_documents([d.model_copy() for d in MEMORIES], HashedBagOfWords())
    out = HeapRankRetriever(vectorstore=store, state="memory://", now=NOW).invoke(QUERY)
    assert {d.metadata["heaprank_id"] for d in out} == {d.id for d in MEMORIES}


def test_a_uuid_in_metadata_id_is_the_document_s_own() -> None:
    own = "6f1c2d9e-8a4b-4c1d-9e2f-0a1b2c3d4e5f"
    docs = [Document("Booked the flight to Lisbon", metadata={"id": own}),
            Document("Flights to Lisbon cost 400 dollars")]
    out = HeapRankRetriever(vectorstore=InMemoryVectorStore.from_documents(docs, HashedBagOfWords()),
                            state="memory://", now=NOW).invoke(QUERY)
    assert own in {d.metadata["heaprank_id"] for d in out}
