"""The Lisbon demo: the story the README tells must stay true."""

from __future__ import annotations

import io

from heaprank.app.demo import DAY, MAYA, QUESTION, T0, Store, bm25, run


def test_after_feedback_the_booked_flight_ranks_first_for_maya(tmp_path):
    out = io.StringIO()
    rr = run(out, f"sqlite:///{tmp_path / 'demo.db'}")
    text = out.getvalue()
    after = text.split("=== 2.")[1]
    heaprank_lines = [ln for ln in after.splitlines() if "heaprank" in ln]
    assert "Booked the flight" in heaprank_lines[0]
    # Maya never gave feedback: what moved her ranking was learned from other users.
    assert all(not ns.endswith("maya") for ns in rr.state.namespaces())
    rr.close()


def test_day_one_moves_only_by_importance():
    out = io.StringIO()
    run(out, None)
    day_one = out.getvalue().split("=== 2.")[0]
    assert "useful 0." not in day_one  # EXPLAIN is printed only after feedback
    store = Store({})
    from heaprank import Reranker
    from heaprank.app.demo import MAYA_MEMORIES

    for doc_id, text, day, kind, source in MAYA_MEMORIES:
        store.add(MAYA, doc_id, text, kind=kind, source=source, created_at=T0 + day * DAY)
    ranking = Reranker().rerank(QUESTION, store.search(MAYA, QUESTION), namespace=MAYA, k=5,
                                now=T0 + 30 * DAY, track=False)
    assert len({round(r.signals["usefulness"], 12) for r in ranking}) == 1


def test_demo_output_is_deterministic():
    first, second = io.StringIO(), io.StringIO()
    run(first, None)
    run(second, None)
    assert first.getvalue() == second.getvalue()


def test_bm25_ranks_the_wish_and_price_above_the_booking():
    docs = [("wish", "I have always wanted to see Lisbon, the flights there look amazing"),
            ("booked", "Booked the flight: SFO to LIS, departs March 14, 9:40am"),
            ("other", "Nothing in common here")]
    hits = bm25(QUESTION, docs)
    assert [d for d, _ in hits] == ["wish", "booked"]
