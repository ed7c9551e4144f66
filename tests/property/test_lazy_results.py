"""A reranker's results make parts of themselves on first use (their EXPLAIN line, and fields
from the rerank's :class:`~heaprank.scoring.results.ResultSource`): to a user they must be the
:class:`Ranked` a plain constructor gives from the same values, whatever is read first.

The same rerank is run three times (not tracked: the state does not change between them) and
its results are read in different orders: EXPLAIN first, the fields first, or only through
equality, ``repr``, ``to_dict``, ``dataclasses.replace``, copy and pickle. Each result must
equal an eager ``Ranked(...)`` of its values, compose the line that one composes field by field,
and keep one object per field whatever reads it first.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading

from hypothesis import given
from hypothesis import strategies as st

from heaprank import Config, CoUse, Ranked, Reranker
from tests.property.test_hot_path_reference import (
    fused_candidates,
    lever_queries,
    levers,
    weights,
)
from tests.strategies import NOW

DAY_S = 86_400.0
FIELDS = tuple(f.name for f in dataclasses.fields(Ranked) if f.init)

#: Settings with notes on the details (reinforcement, Ebbinghaus recency, co-use) and without.
extras = st.fixed_dictionaries({
    "learning": st.fixed_dictionaries({"co_use": st.sampled_from([None, CoUse()])}),
    "retention": st.fixed_dictionaries({
        "recency_kernel": st.sampled_from(["exponential", "ebbinghaus"])}),
})


def _eager(item: Ranked) -> Ranked:
    """The result a plain constructor makes from ``item``'s values (copies of its mappings)."""
    return Ranked(**{name: dict(value) if isinstance(value, dict) else value
                     for name, value in ((n, getattr(item, n)) for n in FIELDS)})



@given(fused_candidates(), lever_queries, weights, extras, levers, st.integers(1, 12),
       st.lists(st.integers(0, 11), max_size=3))
def test_results_made_on_demand_are_the_eager_ones(cands, query, w, extra, lever, k, used):
    if w.association > 0 and extra["learning"]["co_use"] is None:
        extra = {**extra, "learning": {"co_use": CoUse()}}
    rr = Reranker(config=Config().with_changes(weights=w, **extra, **lever))
    first = rr.rerank(query, cands, namespace="ns", k=k, now=NOW)
    rr.feedback(first.recall_id, used=[first.ids[u] for u in used if u < len(first)], now=NOW)
    runs = [rr.rerank(query, cands, namespace="ns", k=k, now=NOW + DAY_S, track=False)
            for _ in range(4)]
    explained_first, fields_first, untouched, threaded = runs

    lines = [item.explain() for item in explained_first]  # EXPLAIN before any field
    for item, line in zip(explained_first, lines):
        assert item.explain() is line  # composed once
    for a, b, c, line in zip(explained_first, fields_first, untouched, lines):
        values = {name: getattr(b, name) for name in FIELDS}  # every field before EXPLAIN
        for name in FIELDS:
            assert getattr(b, name) is values[name]  # one object, whoever reads it
        eager = _eager(b)
        assert type(b.signals) is dict and type(b.details) is dict and type(b.weights) is dict
        assert b.explain() == line == eager.explain()
        assert a == b == c == eager  # equality reads the fields of c first
        assert repr(c) == repr(b) == repr(eager)
        assert c.to_dict() == eager.to_dict()
        for clone in (dataclasses.replace(c), copy.copy(c), copy.deepcopy(c),
                      pickle.loads(pickle.dumps(c))):
            assert clone == eager and clone.explain() == line

    # A field read from many threads at once is still one object.
    for item in threaded:
        seen: list[object] = []

        def read(item: Ranked = item, seen: list[object] = seen) -> None:
            seen.append(item.details)

        readers = [threading.Thread(target=read) for _ in range(4)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        assert all(d is seen[0] for d in seen)



@given(fused_candidates(), lever_queries, st.integers(1, 6))
def test_a_changed_details_mapping_shows_in_a_line_composed_after(cands, query, k):
    """What a plain result does: its details are a dict, and EXPLAIN reads them when composed."""
    rr = Reranker()
    ranking = rr.rerank(query, cands, k=k, now=NOW, track=False)
    for item in ranking:
        item.details["relevance"] = "changed"
        eager = _eager(item)
        assert item.explain() == eager.explain()
        assert "(changed)" in item.explain() or item.weights["relevance"] == 0
