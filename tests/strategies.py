"""Hypothesis strategies for heaprank: candidates, retriever scores, queries, feedback sequences.

Scores are integers / 100 in a modest range, so scaling or shifting them never merges two
distinct values through floating-point noise alone (the invariants are about order, not ulps).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from heaprank.config import DEFAULT_KIND_IMPORTANCE

#: The fixed "now" of every generated candidate set (2025-06-15T15:06:40Z).
NOW = 1_750_000_000.0
DAY = 86_400.0

KINDS = sorted(DEFAULT_KIND_IMPORTANCE) + ["custom"]
SOURCES = ["maya", "assistant", "Zoë", "Москва"]
TEXTS = [
    "My flight to Lisbon leaves on March 3 at 10:40",
    "I prefer window seats",
    "Remember to call Zoë tomorrow",
    "The hotel costs $120 a night",
    "Встреча в Москва в понедельник",
    "会议在3月14日",
    "Is the museum open on Sundays?",
    "ok",
    "We talked about the weather and nothing else in particular for quite a while, then "
    "moved on to books, films, the neighbour's dog and the price of coffee in town",
]
QUERIES = [
    "When is my flight to Lisbon?",
    "Who is Zoë?",
    "Where did we stay?",
    "How many nights?",
    "How much was the hotel?",
    "What do I prefer?",
    "Why did we go?",
    "How do I get there?",
    "Is it open?",
    "tell me something",
    "",
    "the of and",
    "Где Москва?",
]

#: A retriever score: an integer / 100 in [-10, 10].
scores = st.integers(min_value=-1000, max_value=1000).map(lambda x: x / 100)

queries = st.one_of(st.sampled_from(QUERIES), st.text(max_size=40))

texts = st.one_of(st.sampled_from(TEXTS),
                  st.text(min_size=1, max_size=60).filter(lambda t: t.strip() != ""))


@st.composite
def metadata(draw: st.DrawFn, *, keys: bool = True) -> dict[str, Any]:
    """Valid shape metadata: every field optional."""
    meta: dict[str, Any] = {}
    if draw(st.booleans()):
        meta["kind"] = draw(st.sampled_from(KINDS))
    if draw(st.booleans()):
        meta["source"] = draw(st.sampled_from(SOURCES))
    if draw(st.booleans()):
        meta["created_at"] = NOW - draw(st.integers(min_value=0, max_value=400 * 24)) * 3600.0
    if draw(st.booleans()):
        meta["importance"] = draw(st.integers(min_value=1, max_value=50)) / 10
    if keys and draw(st.integers(0, 3)) == 0:
        meta["key"] = draw(st.sampled_from(["plan", "seat"]))
        if draw(st.booleans()):
            meta["version"] = draw(st.integers(min_value=1, max_value=5))
    if draw(st.integers(0, 4)) == 0:
        meta["source_count"] = draw(st.integers(min_value=1, max_value=20))
        if draw(st.booleans()):
            meta["confidence"] = draw(st.integers(min_value=0, max_value=10)) / 10
    return meta


@st.composite
def candidate_lists(draw: st.DrawFn, *, min_size: int = 1, max_size: int = 12,
                    scored: bool | None = True, with_metadata: bool = True,
                    keys: bool = True) -> list[dict[str, Any]]:
    """A list of candidate mappings with unique ids.

    ``scored``: True every candidate has a score, False none has, None either (all or none).
    """
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    if scored is None:
        scored = draw(st.booleans())
    out = []
    for i in range(n):
        cand: dict[str, Any] = {"id": f"d{i}", "text": draw(texts)}
        if scored:
            cand["score"] = draw(scores)
        if with_metadata:
            cand["metadata"] = draw(metadata(keys=keys))
        out.append(cand)
    return out


# Feedback sequences: (query index, shown candidate indices, used subset) over a small pool.
POOL = [
    {"id": f"p{i}", "text": TEXTS[i % len(TEXTS)], "score": float(10 - i),
     "metadata": {"kind": KINDS[i % len(KINDS)], "source": SOURCES[i % len(SOURCES)]}}
    for i in range(8)
]


@st.composite
def feedback_step(draw: st.DrawFn) -> tuple[str, str, int, list[int]]:
    """``(namespace, query, k, used ranks)``: one rerank of :data:`POOL` and its feedback."""
    namespace = draw(st.sampled_from(["alice", "bob", "carol"]))
    query = draw(st.sampled_from(QUERIES))
    k = draw(st.integers(min_value=1, max_value=len(POOL)))
    used = draw(st.lists(st.integers(min_value=0, max_value=k - 1), unique=True, max_size=k))
    return namespace, query, k, used


feedback_sequences = st.lists(feedback_step(), min_size=1, max_size=12)
