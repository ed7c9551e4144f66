"""HeapRankReranker: a real BaseDocumentCompressor over real Documents."""

from __future__ import annotations

import asyncio
import logging
import pickle
from datetime import datetime, timezone
from pathlib import Path

import pytest
from heaprank import Config, ConfigError, InputError, InputTypeError, Reranker, Scoring
from heaprank.config import RECENCY_EVERY_QUESTION
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ValidationError

from langchain_heaprank import HeapRankReranker
from lc_support import DAY, MEMORIES, NOW

#: Recency on every question (by default only on questions about the current state), for the
#: tests of how a document's dates read.
_RECENCY_ALWAYS = Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION))

QUERY = "When is my flight to Lisbon?"


def _docs() -> list[Document]:
    return [d.model_copy(deep=True) for d in MEMORIES]


def test_is_a_document_compressor() -> None:
    assert BaseDocumentCompressor in HeapRankReranker.__mro__


@pytest.mark.parametrize("keyword", ["topn", "model"])
def test_unknown_keywords_are_rejected(keyword: str) -> None:
    with pytest.raises(ValidationError, match=keyword):
        HeapRankReranker(state="memory://", **{keyword: 3})


@pytest.mark.parametrize(("keyword", "hint"), [("top_k", "top_n="), ("reranker", "state="),
                                               ("state_url", "state=")])
def test_names_of_other_packages_say_what_to_pass(keyword: str, hint: str) -> None:
    with pytest.raises(TypeError, match=hint):
        HeapRankReranker(**{keyword: "memory://"})


def test_state_of_the_wrong_type_is_named() -> None:
    with pytest.raises((TypeError, ValidationError), match="state"):
        HeapRankReranker(state=3)


def test_unknown_metadata_field_is_named() -> None:
    with pytest.raises(ValidationError, match="created"):
        HeapRankReranker(state="memory://", metadata_keys={"created": "ts"})


def test_default_state_is_the_sqlite_file_the_cli_reads(tmp_path: Path) -> None:
    rr = HeapRankReranker(now=NOW)
    assert rr.state == f"sqlite:///{tmp_path / 'heaprank.db'}"
    out = rr.compress_documents(_docs(), QUERY)
    rr.engine.feedback(out[0].metadata["heaprank_recall_id"], used=[out[0].id])
    rr.engine.close()
    again = HeapRankReranker(now=NOW)  # a new process would open the same file
    assert again.engine.stats()["feedbacks"] == 1 and again.engine.links("default")
    again.engine.close()


def test_default_state_follows_heaprank_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEAPRANK_STATE", "sqlite:///elsewhere.db")
    assert HeapRankReranker().state == f"sqlite:///{tmp_path / 'elsewhere.db'}"


def test_returns_new_documents_with_ids_kept_and_callers_untouched(reranker: HeapRankReranker) -> None:
    docs = _docs()
    before = [dict(d.metadata) for d in docs]
    out = reranker.compress_documents(docs, QUERY)
    assert len(out) == 3
    assert [d.metadata for d in docs] == before
    assert all(o is not d for o in out for d in docs)
    assert {d.id for d in out} <= {d.id for d in docs}
    assert [d.metadata["heaprank_rank"] for d in out] == [1, 2, 3]
    assert len({d.metadata["heaprank_recall_id"] for d in out}) == 1
    assert all(d.metadata["heaprank_explain"].startswith("rel ") for d in out)


def test_relevance_score_is_in_0_1_non_increasing_with_the_raw_score_beside(
        reranker: HeapRankReranker) -> None:
    out = reranker.model_copy(update={"top_n": None}).compress_documents(_docs(), QUERY)
    relevance = [d.metadata["relevance_score"] for d in out]
    raw = [d.metadata["heaprank_score"] for d in out]
    assert relevance[0] == 1.0 and all(0.0 <= r <= 1.0 for r in relevance)
    assert relevance == sorted(relevance, reverse=True)
    assert relevance == pytest.approx([s / raw[0] for s in raw])
    # What a downstream cutoff sees: the raw products would all fall under it.
    assert max(raw) < 0.7 and [d for d in out if d.metadata["relevance_score"] >= 0.7]


def test_upstream_relevance_is_read_kept_and_never_confused_with_heaprank_s(
        reranker: HeapRankReranker) -> None:
    same = {"kind": "fact", "created_at": NOW - DAY}
    docs = [Document("alpha text", id="a", metadata={**same, "relevance_score": 0.2}),
            Document("beta text", id="b", metadata={**same, "relevance_score": 0.9})]
    first = reranker.compress_documents(docs, "text")  # a Cohere-style upstream score
    assert [d.id for d in first] == ["b", "a"]
    assert [d.metadata["retrieval_score"] for d in first] == [0.9, 0.2]
    assert "score 0.9" in first[0].metadata["heaprank_explain"]
    again = reranker.compress_documents(list(reversed(first)), "text")  # read from retrieval_score
    assert [d.id for d in again] == ["b", "a"] and "score 0.9" in again[0].metadata["heaprank_explain"]
    unscored = reranker.compress_documents([Document("alpha text", id="a", metadata=dict(same)),
                                            Document("beta text", id="b", metadata=dict(same))], "text")
    twice = reranker.compress_documents(list(reversed(unscored)), "text")
    assert "(rank 1)" in twice[0].metadata["heaprank_explain"]  # not heaprank's relevance_score
    assert "retrieval_score" not in twice[0].metadata


def test_output_keys_are_configurable(reranker: HeapRankReranker) -> None:
    rr = reranker.model_copy(update={"score_key": "hr_score", "explain_key": "why", "rank_key": "pos"})
    out = rr.compress_documents(_docs(), "flight")
    assert {"hr_score", "why", "pos"} <= set(out[0].metadata)
    assert "heaprank_explain" not in out[0].metadata


def test_top_n_none_keeps_all_and_empty_input_gives_nothing(reranker: HeapRankReranker) -> None:
    assert len(reranker.model_copy(update={"top_n": None}).compress_documents(_docs(), "x")) == 4
    assert reranker.compress_documents([], "flight") == []
    with pytest.raises(ValidationError, match="top_n"):
        HeapRankReranker(state="memory://", top_n=0)


@pytest.mark.parametrize("created", [
    datetime.fromtimestamp(NOW - 3 * DAY, tz=timezone.utc),
    NOW - 3 * DAY,
    datetime.fromtimestamp(NOW - 3 * DAY, tz=timezone.utc).isoformat(),
])
def test_created_at_as_datetime_epoch_or_iso_reads_the_same(created: object) -> None:
    reranker = HeapRankReranker(state="memory://", now=NOW, config=_RECENCY_ALWAYS)
    doc = Document("note about the flight", id="n", metadata={"created_at": created})
    assert "age 3.0d" in reranker.compress_documents([doc], "flight")[0].metadata["heaprank_explain"]


def test_recency_and_importance_keys_are_configurable() -> None:
    rr = HeapRankReranker(state="memory://", now=NOW, config=_RECENCY_ALWAYS,
                          metadata_keys={"created_at": "ts", "importance": "weight"})
    old = Document("flight note one", id="old", metadata={"ts": NOW - 300 * DAY})
    new = Document("flight note two", id="new", metadata={"ts": NOW - 1 * DAY, "weight": 2.0})
    out = rr.compress_documents([old, new], "flight")
    assert out[0].id == "new"
    explain = out[0].metadata["heaprank_explain"]
    assert "age 1.0d" in explain and "importance 2.00 (explicit)" in explain


def test_bad_metadata_is_neutralised_flagged_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    reranker = HeapRankReranker(state="memory://", top_n=3, now=NOW, config=_RECENCY_ALWAYS)
    docs = [Document("flight one", id="bad", metadata={"created_at": "next tuesday-ish",
                                                        "kind": {"x": 1}, "importance": "high"}),
            Document("flight two", id="good", metadata={"created_at": NOW - DAY})]
    with caplog.at_level(logging.WARNING, logger="langchain_heaprank"):
        out = reranker.compress_documents(docs, "flight")
    explain = next(d for d in out if d.id == "bad").metadata["heaprank_explain"]
    flags = explain.split(" ! ")[1]
    assert "created_at unparsable" in flags and "kind not str (dict)" in flags
    assert "importance" in flags and "no date" in explain  # the recency signal is neutral
    assert any("bad" in r.getMessage() for r in caplog.records)


def test_strict_mode_raises_naming_the_key(reranker: HeapRankReranker) -> None:
    strict = reranker.model_copy(update={"strict": True})
    with pytest.raises((InputError, InputTypeError), match="kind"):
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
    sync = rr.compress_documents(_docs(), QUERY)
    asyn = asyncio.run(rr.acompress_documents(_docs(), QUERY))
    assert [(d.id, d.metadata["relevance_score"]) for d in sync] == \
        [(d.id, d.metadata["relevance_score"]) for d in asyn]
    assert type(rr).acompress_documents is not BaseDocumentCompressor.acompress_documents


def test_feedback_through_the_engine_moves_a_used_document_up() -> None:
    rr = HeapRankReranker(state="memory://", top_n=4, now=NOW)
    before = [d.id for d in rr.compress_documents(_docs(), QUERY)]
    assert before.index("price") > 0
    for _ in range(5):
        out = rr.compress_documents(_docs(), QUERY)
        rr.engine.feedback(out[0].metadata["heaprank_recall_id"], used=["price"])
    after = [d.id for d in rr.compress_documents(_docs(), QUERY)]
    assert after.index("price") < before.index("price")


def test_numpy_scores_are_numbers(reranker: HeapRankReranker) -> None:
    np = pytest.importorskip("numpy")
    docs = [Document("alpha", id="a", metadata={"relevance_score": np.float32(0.1)}),
            Document("beta", id="b", metadata={"relevance_score": np.float32(0.8)})]
    out = reranker.compress_documents(docs, "text")
    assert [d.id for d in out] == ["b", "a"]
    assert " ! " not in out[0].metadata["heaprank_explain"]


def test_pickle_reopens_the_state_and_keeps_learning_in_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    rr = HeapRankReranker(state=Reranker(url), top_n=2, namespace="user:maya", now=NOW)
    clone = pickle.loads(pickle.dumps(rr))
    assert (clone.top_n, clone.namespace, clone.state) == (2, "user:maya", rr.state)
    assert clone.state.startswith(f"sqlite:///{tmp_path / 'x.db'}")
    out = clone.compress_documents(_docs(), QUERY)
    clone.engine.feedback(out[0].metadata["heaprank_recall_id"], used=[out[1].id])
    assert rr.engine.links("user:maya") == clone.engine.links("user:maya") != []


def test_pickle_carries_the_engine_settings(tmp_path: Path) -> None:
    config = Config(scoring=Scoring(fusion_weights={"bm25": 2.0}))
    rr = HeapRankReranker(state=f"sqlite:///{tmp_path / 'x.db'}", config=config)
    assert pickle.loads(pickle.dumps(rr)).engine.config == rr.engine.config == config
    with pytest.raises(ValueError, match="config= goes with a state URL"):
        HeapRankReranker(state=Reranker(), config=config)


def test_an_in_memory_state_refuses_to_pickle_rather_than_lose_its_learning() -> None:
    with pytest.raises(ConfigError, match="sqlite"):
        pickle.dumps(HeapRankReranker(state="memory://"))


def test_model_dump_holds_the_state_and_the_schema_builds(tmp_path: Path) -> None:
    rr = HeapRankReranker(state="sqlite:///dumped.db", top_n=5)
    data = rr.model_dump()
    assert data["state"] == f"sqlite:///{tmp_path / 'dumped.db'}" and data["top_n"] == 5
    rebuilt = HeapRankReranker(**data)
    assert rebuilt.state == rr.state and rebuilt.engine is not rr.engine
    schema = HeapRankReranker.model_json_schema()["properties"]
    assert schema["state"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert {"top_n", "namespace"} <= set(schema)


def test_pickle_reopens_a_redis_state_and_keeps_learning_in_it(redis_url: str) -> None:
    rr = HeapRankReranker(state=redis_url, top_n=2, namespace="user:maya", now=NOW)
    out = rr.compress_documents(_docs(), QUERY)
    rr.engine.feedback(out[0].metadata["heaprank_recall_id"], used=[out[1].id],
                       namespace="user:maya")
    clone = pickle.loads(pickle.dumps(rr))
    assert clone.state == rr.state and clone.engine is not rr.engine
    assert clone.engine.links("user:maya") == rr.engine.links("user:maya") != []
    again = clone.compress_documents(_docs(), QUERY)  # the clone writes to the same server
    clone.engine.feedback(again[0].metadata["heaprank_recall_id"], used=[again[0].id],
                          namespace="user:maya")
    assert rr.engine.stats()["feedbacks"] == 2


def test_a_query_with_no_content_words_logs_no_warning_per_document(
        reranker: HeapRankReranker, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="langchain_heaprank"):
        out = reranker.compress_documents(_docs(), "when")
    assert "query has no content words" in out[0].metadata["heaprank_explain"]  # EXPLAIN says it
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
