"""The memory backend's lean feedback path (``MemoryState.apply_used``) learns exactly what the
general path (a :class:`FeedbackBatch` through ``apply_feedback``) learns, to the last bit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from heaprank import Config, MemoryState, Reranker
from heaprank.errors import FeedbackError
from heaprank.learning.co_use import CoUse
from tests.strategies import NOW, POOL


class GeneralMemoryState(MemoryState):
    """A memory state that offers no lean path: the reranker then builds the batch."""

    apply_used = None  # type: ignore[assignment]


class CountingMemoryState(MemoryState):
    """A memory state that counts the feedbacks its lean path applied."""

    lean = 0

    def apply_used(self, *args, **kwargs):
        out = super().apply_used(*args, **kwargs)
        self.lean += out is not None
        return out


# One operation on a fresh rerank: (namespace, query, k, form, used ranks, retry)
_operation = st.tuples(
    st.sampled_from(["alice", "bob"]),
    st.sampled_from(["when is my flight", "who is Zoë", "hotel price", "seats"]),
    st.integers(1, 8),
    st.sampled_from(["feedback", "mark_used", "mark_ignored", "explicit", "wrong_namespace"]),
    st.lists(st.integers(0, 7), max_size=4),
    st.booleans(),
)


def _run(rr: Reranker, operations) -> list[object]:
    seen: list[object] = []
    for t, (namespace, query, k, form, used, retry) in enumerate(operations):
        ranking = rr.rerank(query, POOL, namespace=namespace, k=k, now=NOW + t)
        ids = [ranking.ids[r] for r in used if r < len(ranking.ids)]
        for attempt in range(2 if retry else 1):  # a retry must change nothing
            try:
                if form == "feedback":
                    out = rr.feedback(ranking.recall_id, used=ids,
                                      now=None if attempt else NOW + t + 1)
                elif form == "mark_used":  # several calls, then the rest ignored
                    for d in ids:
                        rr.mark_used(ranking.recall_id, d, now=NOW + t)
                    out = rr.feedback(ranking.recall_id, used=ids, now=NOW + t + 2)
                elif form == "mark_ignored":
                    rest = [d for d in ranking.ids if d not in ids]
                    if rest:
                        rr.mark_ignored(ranking.recall_id, rest[:1], now=NOW + t)
                    out = rr.feedback(ranking.recall_id, used=ids)
                elif form == "explicit":
                    out = rr.feedback(namespace=namespace, query=query, used=ids,
                                      shown=[c for c in POOL if c["id"] in ranking.ids],
                                      feedback_id=f"fb{t}", now=NOW + t)
                else:
                    out = rr.feedback(ranking.recall_id, used=ids, namespace="carol")
                seen.append((out.applied, out.already_recorded))
            except FeedbackError as exc:
                seen.append(str(exc).replace(ranking.recall_id, "<recall>"))
    return seen


def _learned(rr: Reranker) -> tuple:
    state = rr.state
    links = {ns: tuple(a.tolist() if hasattr(a, "tolist") else a for a in state.list_links(ns))
             for ns in (None, "alice", "bob")}
    docs = {ns: state.iter_docs(ns) for ns in ("alice", "bob")}
    log = [(imp.namespace, imp.ids, imp.verdicts, imp.time) for imp in state.feedback_log()]
    edges = {ns: state.list_edges(ns) for ns in ("alice", "bob")}
    return links, docs, len(log), sorted(log), edges, state.stats()


@settings(max_examples=60, deadline=None)
@given(st.lists(_operation, min_size=1, max_size=10),
       st.sampled_from(["log", "none"]), st.booleans(), st.booleans(), st.booleans())
def test_lean_feedback_learns_what_the_general_path_learns(operations, discount, em,
                                                           doc_features, co_use):
    config = Config(reject_discount=discount, em_credit=em, doc_features=doc_features,
                    co_use=CoUse() if co_use else None)
    lean = Reranker(CountingMemoryState(), config=config)
    general = Reranker(GeneralMemoryState(), config=config)
    assert _run(lean, operations) == _run(general, operations)
    assert _learned(lean) == _learned(general)
    if not co_use and any(form == "feedback" for _, _, _, form, _, _ in operations):
        assert lean.state.lean > 0  # the lean path did run
