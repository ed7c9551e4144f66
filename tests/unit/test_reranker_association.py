"""The association factor through Reranker: EXPLAIN, the read only when it counts, the impression
column, per-call settings, and backends that keep no edges."""

from __future__ import annotations

import asyncio

import pytest

from heaprank import Config, ConfigError, CoUse, Learning, MemoryState, Reranker
from heaprank.learning.evaluation import LeaveNamespaceOut

NOW = 1_750_000_000.0
DAY = 86_400.0
CANDS = [{"id": f"d{i}", "text": f"note {i} about things", "score": float(10 - i)}
         for i in range(8)]
LEARN = Config(learning=Learning(co_use=CoUse()))
WEIGHTED = LEARN.with_weights(association=1.0)


def _taught(config: Config = LEARN, state: MemoryState | None = None) -> Reranker:
    """d0 (the retriever's best) and d6 used together three times."""
    rr = Reranker(state or MemoryState(), config=config)
    for t in range(3):
        ranking = rr.rerank("what things?", CANDS, namespace="n", k=8, now=NOW + t)
        rr.feedback(ranking.recall_id, used=["d0", "d6"])
    return rr


def test_explain_names_the_partner_and_the_co_uses():
    rr = _taught(WEIGHTED)
    ranking = rr.rerank("what things?", CANDS, namespace="n", k=8, now=NOW + 10)
    d6 = next(r for r in ranking if r.id == "d6")
    strength = 1 - 0.8 ** 3  # three co-uses, seconds apart: no decay worth a digit
    assert d6.signals["association"] == pytest.approx(1 + 0.5 * strength, rel=1e-6)
    assert d6.explain().endswith(" x assoc 1.24 (co-used with d0 x3)")
    plain = rr.rerank("what things?", CANDS, namespace="n", k=8, now=NOW + 10, track=False,
                      config=LEARN)
    before = next(r for r in plain if r.id == "d6")
    assert d6.score / before.score == pytest.approx(d6.signals["association"])
    d1 = next(r for r in ranking if r.id == "d1")
    assert d1.explain().endswith(" x assoc 1.00")  # weighted, but no edge: no note
    assert "association" in ranking.to_dicts()[0]["signals"]


def test_a_zero_weight_leaves_explain_as_it_was():
    rr = _taught()
    line = rr.rerank("what things?", CANDS, namespace="n", k=8, now=NOW + 10)[0].explain()
    assert "assoc" not in line


class _Spy(MemoryState):
    def __init__(self) -> None:
        super().__init__()
        self.edge_reads = 0

    def read_with_edges(self, namespace, features, ids):
        self.edge_reads += 1
        return super().read_with_edges(namespace, features, ids)


def test_edges_are_read_only_when_their_weight_is_above_zero():
    spy = _Spy()
    rr = _taught(LEARN, spy)
    assert spy.edge_reads == 0
    rr.rerank("what things?", CANDS, namespace="n", k=3, now=NOW + 9, config=WEIGHTED)
    assert spy.edge_reads == 1


def test_the_impression_keeps_the_association_when_it_counted():
    rr = _taught(WEIGHTED)
    ranking = rr.rerank("what things?", CANDS, namespace="n", k=8, now=NOW + 10)
    imp = rr.state.get_impression(ranking.recall_id)
    assert imp.signal_names[-1] == "association"
    assert imp.signals[ranking.ids.index("d6")][-1] == pytest.approx(
        ranking[ranking.ids.index("d6")].signals["association"], rel=1e-6)
    rr2 = _taught()  # weight 0: the column is not stored
    r2 = rr2.rerank("what things?", CANDS, namespace="n", k=8, now=NOW + 10)
    assert "association" not in rr2.state.get_impression(r2.recall_id).signal_names


def test_co_use_settings_belong_to_the_reranker():
    rr = _taught(LEARN)
    with pytest.raises(ConfigError, match="co_use"):
        rr.rerank("what things?", CANDS, namespace="n", now=NOW,
                  config=Config(learning=Learning(co_use=CoUse(seeds=2))).with_weights(association=1.0))
    with pytest.raises(ConfigError, match="weights.association"):
        Reranker().rerank("what things?", CANDS, namespace="n", now=NOW,
                          config=Config().with_weights(association=1.0))


def test_a_newcomer_view_sees_no_edges_of_the_namespace():
    rr = _taught(WEIGHTED)
    view = rr.with_state(LeaveNamespaceOut(rr.state))
    ranking = view.rerank("what things?", CANDS, namespace="n", k=8, now=NOW + 10, track=False)
    assert all(r.signals["association"] == 1.0 for r in ranking)


class _NoEdges:
    """A backend of someone else's that predates co-use edges: everything but the edge calls."""

    def __init__(self) -> None:
        self._inner = MemoryState()
        for name in ("read_links", "read", "put_impression", "get_impression", "apply",
                     "list_links", "namespaces", "forget_namespace", "stats", "close",
                     "feedback_log"):
            setattr(self, name, getattr(self._inner, name))


def test_a_backend_without_edges_is_refused_before_anything_is_applied():
    rr = Reranker(_NoEdges(), config=LEARN)
    ranking = rr.rerank("what things?", CANDS, namespace="n", k=3, now=NOW)  # weight 0: fine
    with pytest.raises(ConfigError, match="stores no co-use edges"):
        rr.feedback(ranking.recall_id, used=["d0", "d1"])
    assert rr.stats()["feedbacks"] == 0
    with pytest.raises(ConfigError, match="stores no co-use edges"):
        rr.rerank("what things?", CANDS, namespace="n", now=NOW, config=WEIGHTED)
    assert Reranker(_NoEdges()).rerank("what things?", CANDS, namespace="n", now=NOW).ids


class _Down(MemoryState):
    def read_with_edges(self, namespace, features, ids):
        from heaprank import StateUnavailableError

        raise StateUnavailableError("connection refused")


def test_an_unreachable_state_ranks_without_associations():
    rr = Reranker(_Down(), config=WEIGHTED)
    ranking = rr.rerank("what things?", CANDS, namespace="n", k=8, now=NOW)
    assert ranking.ids == [c["id"] for c in CANDS]  # the retriever's order, as with no state
    assert all(r.signals["association"] == 1.0 and "state unavailable" in r.explain()
               for r in ranking)


class _AsyncTwin:
    """An async twin of a MemoryState (the hot path of AsyncStateBackend, awaiting the sync
    calls), counting the calls it answers; with ``edges`` it also reads co-use edges."""

    def __init__(self, state: MemoryState, edges: bool) -> None:
        self.state, self.calls = state, 0
        if edges:
            self.read_with_edges = self._read_with_edges
            self.edge_state = self._edge_state
            self.list_edges = self._list_edges

    async def _answer(self, name, *args, **kwargs):
        self.calls += 1
        return getattr(self.state, name)(*args, **kwargs)

    async def read(self, *args):
        return await self._answer("read", *args)

    async def _read_with_edges(self, *args):
        return await self._answer("read_with_edges", *args)

    async def _edge_state(self, *args):
        return await self._answer("edge_state", *args)

    async def _list_edges(self, *args):
        return await self._answer("list_edges", *args)

    async def put_impression(self, *args, **kwargs):
        return await self._answer("put_impression", *args, **kwargs)

    async def get_impression(self, *args):
        return await self._answer("get_impression", *args)

    async def read_links(self, *args):
        return await self._answer("read_links", *args)

    async def apply(self, *args):
        return await self._answer("apply", *args)

    async def aclose(self) -> None:
        pass


class _WithTwin(MemoryState):
    def __init__(self, edges: bool) -> None:
        super().__init__()
        self.twin = _AsyncTwin(self, edges)

    def async_backend(self) -> _AsyncTwin:
        return self.twin

    async def aclose_loop(self) -> None:  # (with async_backend: the AsyncProvider Protocol)
        pass


def _taught_async(config: Config, state: _WithTwin) -> tuple[Reranker, list[str]]:
    """_taught through arerank/afeedback, then one more arerank: its EXPLAIN lines."""
    rr = Reranker(state, config=config)

    async def run() -> list[str]:
        for t in range(3):
            ranking = await rr.arerank("what things?", CANDS, namespace="n", k=8, now=NOW + t)
            await rr.afeedback(ranking.recall_id, used=["d0", "d6"])
        last = await rr.arerank("what things?", CANDS, namespace="n", k=8, now=NOW + 10)
        return [r.explain() for r in last]

    return rr, asyncio.run(run())


@pytest.mark.parametrize("edges", [True, False])
def test_async_co_use_uses_a_twin_only_if_it_keeps_edges(edges):
    """With co_use, an async twin that does not store edges (no AsyncEdgeBackend) is passed
    over for the worker thread, so edges are still learned and read; with one, the twin
    serves."""
    rr, lines = _taught_async(WEIGHTED, _WithTwin(edges))
    assert (rr.state.twin.calls > 0) == edges
    assert lines == [r.explain() for r in _taught(WEIGHTED).rerank(
        "what things?", CANDS, namespace="n", k=8, now=NOW + 10)]
    assert [e[:2] for e in rr.state.list_edges("n")] == [("d0", "d6")]
    assert any("co-used with d0 x3" in line for line in lines)


def test_without_co_use_an_async_twin_serves_even_without_edges():
    rr, _ = _taught_async(Config(), _WithTwin(edges=False))
    # a rerank: read, put; a feedback: read the used items' links (its EM credit), apply (the
    # impression is the copy the reranker kept of its own rerank)
    assert rr.state.twin.calls == 3 * 4 + 2
