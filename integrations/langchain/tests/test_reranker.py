"""HeapRankReranker: a real BaseDocumentCompressor over real Documents."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone

import pytest
from heaprank import InputError, Reranker
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ValidationError

from langchain_heaprank import HeapRankReranker
from lc_support import DAY, MEMORIES, NOW


def _docs() -> list[Document]:
    return [d.model_copy(deep=True) for d in MEMORIES]


def test_is_a_document_compressor() -> None:
    assert BaseDocumentCompressor in HeapRankReranker.__mro__


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="topn"):
        HeapRankReranker(topn=3)


def test_unknown_metadata_field_is_named() -> None:
    with pytest.raises(ValidationError, match="created"):
        HeapRankReranker(metadata_keys={"created": "ts"})


def test_returns_new_documents_with_ids_kept_and_callers_untouched(reranker: HeapRankReranker) -> None:
    docs = _docs()
    before = [dict(d.metadata) for d in docs]
    out = reranker.compress_documents(docs, "When is my flight to Lisbon?")
    assert len(out) == 3
    assert [d.metadata for d in docs] == before
    assert all(o is not d for o in out for d in docs)
    assert {d.id for d in out} <= {d.id for d in docs}
    assert [d.metadata["heaprank_rank"] for d in out] == [1, 2, 3]
    scores = [d.metadata["relevance_score"] for d in out]
    assert scores == sorted(scores, reverse=True)
    recall_ids = {d.metadata["heaprank_recall_id"] for d in out}
    assert len(recall_ids) == 1
    assert all(d.metadata["heaprank_explain"].startswith("rel ") for d in out)


def test_output_keys_are_configurable(reranker: HeapRankReranker) -> None:
    rr = reranker.model_copy(update={"score_key": "hr_score", "explain_key": "why", "rank_key": "pos"})
    out = rr.compress_documents(_docs(), "flight")
    assert {"hr_score", "why", "pos"} <= set(out[0].metadata)
    assert "heaprank_explain" not in out[0].metadata


def test_top_n_none_keeps_all(reranker: HeapRankReranker) -> None:
    rr = reranker.model_copy(update={"top_n": None})
    assert len(rr.compress_documents(_docs(), "flight")) == len(MEMORIES)


def test_empty_input_gives_empty_output(reranker: HeapRankReranker) -> None:
    assert reranker.compress_documents([], "flight") == []


def test_relevance_from_a_metadata_score_else_from_order(reranker: HeapRankReranker) -> None:
    same = {"kind": "fact", "created_at": NOW - DAY}
    docs = [Document("alpha text", id="a", metadata=dict(same)),
            Document("beta text", id="b", metadata=dict(same))]
    by_order = reranker.compress_documents(docs, "text")
    assert [d.id for d in by_order] == ["a", "b"]
    assert "rank 1" in by_order[0].metadata["heaprank_explain"]
    scored = [d.model_copy(update={"metadata": {**d.metadata, "relevance_score": s}})
              for d, s in zip(docs, [0.2, 0.9])]
    by_score = reranker.compress_documents(scored, "text")
    assert [d.id for d in by_score] == ["b", "a"]
    assert "score 0.9" in by_score[0].metadata["heaprank_explain"]


@pytest.mark.parametrize("created", [
    datetime.fromtimestamp(NOW - 3 * DAY, tz=timezone.utc),
    NOW - 3 * DAY,
    datetime.fromtimestamp(NOW - 3 * DAY, tz=timezone.utc).isoformat(),
])
def test_created_at_as_datetime_epoch_or_iso_reads_the_same(reranker: HeapRankReranker,
                                                             created: object) -> None:
    doc = Document("note about the flight", id="n", metadata={"created_at": created})
    out = reranker.compress_documents([doc], "flight")
    assert "age 3.0d" in out[0].metadata["heaprank_explain"]


def test_recency_and_importance_keys_are_configurable() -> None:
    rr = HeapRankReranker(reranker=Reranker(), now=NOW,
                          metadata_keys={"created_at": "ts", "importance": "weight"})
    old = Document("flight note one", id="old", metadata={"ts": NOW - 300 * DAY})
    new = Document("flight note two", id="new", metadata={"ts": NOW - 1 * DAY, "weight": 2.0})
    out = rr.compress_documents([old, new], "flight")
    assert out[0].id == "new"
    explain = out[0].metadata["heaprank_explain"]
    assert "age 1.0d" in explain and "importance 2.00 (explicit)" in explain


def test_bad_metadata_is_neutralised_flagged_and_logged(reranker: HeapRankReranker,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    docs = [Document("flight one", id="bad", metadata={"created_at": "next tuesday-ish",
                                                        "kind": {"x": 1}, "importance": "high"}),
            Document("flight two", id="good", metadata={"created_at": NOW - DAY})]
    with caplog.at_level(logging.WARNING, logger="langchain_heaprank"):
        out = reranker.compress_documents(docs, "flight")
    bad = next(d for d in out if d.id == "bad")
    explain = bad.metadata["heaprank_explain"]
    assert "created_at unparsable" in explain
    assert "kind not a string (dict), ignored" in explain
    assert "importance" in explain.split(" ! ")[1]
    assert "no date" in explain  # the recency signal is neutral
    assert any("bad" in r.getMessage() for r in caplog.records)


def test_strict_mode_raises_naming_the_key(reranker: HeapRankReranker) -> None:
    strict = reranker.model_copy(update={"strict": True})
    with pytest.raises(InputError, match="kind"):
        strict.compress_documents([Document("x", id="a", metadata={"kind": 4.5})], "x")
    with pytest.raises(InputError, match="created_at"):
        strict.compress_documents([Document("x", id="a", metadata={"created_at": "soon"})], "x")


def test_duplicate_documents_are_dropped_leniently_and_raise_strictly(reranker: HeapRankReranker) -> None:
    docs = [Document("same", id="a"), Document("same", id="a"), Document("other", id="b")]
    assert [d.id for d in reranker.compress_documents(docs, "same")] == ["a", "b"]
    with pytest.raises(InputError, match="duplicate"):
        reranker.model_copy(update={"strict": True}).compress_documents(docs, "same")


def test_stable_id_without_document_id_is_a_content_hash(reranker: HeapRankReranker) -> None:
    first = reranker.compress_documents([Document("a memory")], "memory")[0]
    again = reranker.compress_documents([Document("a memory")], "memory")[0]
    assert first.id is None
    assert first.metadata["heaprank_id"] == again.metadata["heaprank_id"]
    chunk = reranker.compress_documents([Document("a memory", metadata={"source": "f.txt"})], "m")[0]
    assert chunk.metadata["heaprank_id"].startswith("f.txt#")


def test_async_gives_the_same_ranking_as_sync(reranker: HeapRankReranker) -> None:
    rr = reranker.model_copy(update={"track": False})
    sync = rr.compress_documents(_docs(), "When is my flight to Lisbon?")
    asyn = asyncio.run(rr.acompress_documents(_docs(), "When is my flight to Lisbon?"))
    assert [(d.id, d.metadata["relevance_score"]) for d in sync] == \
        [(d.id, d.metadata["relevance_score"]) for d in asyn]


def test_async_is_native_not_a_thread_hop(reranker: HeapRankReranker) -> None:
    assert type(reranker).acompress_documents is not BaseDocumentCompressor.acompress_documents


def test_feedback_moves_a_used_document_up() -> None:
    rr = HeapRankReranker(reranker=Reranker(), top_n=4, now=NOW)
    query = "When is my flight to Lisbon?"
    before = [d.id for d in rr.compress_documents(_docs(), query)]
    assert before.index("price") > 0
    for _ in range(5):
        out = rr.compress_documents(_docs(), query)
        rr.reranker.feedback(out[0].metadata["heaprank_recall_id"], used=["price"])
    after = [d.id for d in rr.compress_documents(_docs(), query)]
    assert after.index("price") < before.index("price")


def test_numpy_scores_are_numbers(reranker: HeapRankReranker) -> None:
    np = pytest.importorskip("numpy")
    docs = [Document("alpha", id="a", metadata={"relevance_score": np.float32(0.1)}),
            Document("beta", id="b", metadata={"relevance_score": np.float32(0.8)})]
    out = reranker.compress_documents(docs, "text")
    assert [d.id for d in out] == ["b", "a"]
    assert " ! " not in out[0].metadata["heaprank_explain"]
