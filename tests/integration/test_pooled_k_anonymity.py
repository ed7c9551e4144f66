"""A caller's rare label value cannot be probed through the pooled prior, on every backend
(memory, SQLite in a real file, Redis on the shared server and on a local Cluster, PostgreSQL).

The attack (issue 36): tenant A uses ``kind:zorblax`` / ``source:acme-crm`` once; tenant B ranks
a candidate carrying those exact values and one carrying values nobody used. Before the
k-anonymity rule the first scored visibly higher, so B learned A's labels. Now, until
``Config.learning.pooled_min_namespaces`` (5) distinct namespaces hold those values, B's score, its
EXPLAIN, its ``why_not``, its feedback's credit and its ``links()`` are exactly what an unseen
value gives; from the fifth namespace on the pooled evidence applies."""

from __future__ import annotations

import pytest

from heaprank import Config, Learning, MemoryState, Refit, Reranker, SQLiteState, StateBackend
from tests.integration.redis_servers import unique_prefix

BACKENDS = ["memory", "sqlite", "redis", "redis-cluster", "postgres"]
QUERY = "When is the flight?"
TEXT = "Flight to Lisbon on March 3"
CONFIG = Config(refit=Refit(every=0))  # learning.pooled_min_namespaces: the default, 5


def candidate(id: str, kind: str, source: str) -> dict:
    return {"id": id, "text": TEXT, "score": 1.0, "metadata": {"kind": kind, "source": source}}


RARE = ("zorblax", "acme-crm")  # what tenant A uses
UNSEEN = ("quux", "other-crm")  # what nobody uses


@pytest.fixture(params=BACKENDS)
def make_state(request, tmp_path):
    """A factory of fresh states of one kind."""
    opened: list[StateBackend] = []

    def make() -> StateBackend:
        if request.param == "memory":
            backend: StateBackend = MemoryState()
        elif request.param == "sqlite":
            backend = SQLiteState(tmp_path / f"state{len(opened)}.db")
        elif request.param == "postgres":
            from heaprank.state.postgres import PostgresState
            from tests.postgres_server import unique_schema

            backend = PostgresState(request.getfixturevalue("postgres_url"),
                                    schema=unique_schema())
        else:
            from heaprank.state.redis import RedisState

            url = request.getfixturevalue("redis_url" if request.param == "redis"
                                          else "redis_cluster_url")
            backend = RedisState(url, prefix=unique_prefix())
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        if hasattr(backend, "clear"):
            backend.clear()
        backend.close()
        if request.param == "postgres":
            from tests.postgres_server import drop_schema

            drop_schema(request.getfixturevalue("postgres_url"), backend.schema)


@pytest.fixture()
def state(make_state) -> StateBackend:
    return make_state()


def teach(rr: Reranker, namespace: str, values: tuple[str, str] = RARE) -> None:
    """One feedback of ``namespace``: the candidate with ``values`` (A's rare ones) used."""
    ranking = rr.rerank(QUERY, [candidate("x1", *values), {"id": "x2", "text": "ok", "score": 0.5}],
                        namespace=namespace)
    rr.feedback(ranking.recall_id, used=["x1"])


def probe(rr: Reranker) -> tuple:
    """B's view: the candidate with A's values and the one with unseen values, ranked alone
    and side by side."""
    seen = rr.rerank(QUERY, [candidate("b1", *RARE)], namespace="B", track=False)[0]
    unseen = rr.rerank(QUERY, [candidate("b1", *UNSEEN)], namespace="B", track=False)[0]
    both = rr.rerank(QUERY, [candidate("b1", *RARE), candidate("b2", *UNSEEN)], namespace="B",
                     track=False, k=1)
    return seen, unseen, both


def assert_nothing_of_a_reaches_b(rr: Reranker) -> None:
    seen, unseen, both = probe(rr)
    assert seen.score == unseen.score
    assert seen.signals["usefulness"] == unseen.signals["usefulness"]
    assert seen.top_links == unseen.top_links
    assert not any(RARE[0] in f or RARE[1] in f for f, _ in seen.top_links)
    assert seen.explain().replace(RARE[0], UNSEEN[0]) == unseen.explain()
    other = "b2" if both[0].id == "b1" else "b1"
    assert both.why_not(other).score == both[0].score


def test_one_tenants_rare_labels_move_nothing_of_another_until_five_namespaces_hold_them(state):
    rr = Reranker(state, config=CONFIG)
    teach(rr, "A0")
    assert_nothing_of_a_reaches_b(rr)
    for t in range(1, 4):
        teach(rr, f"A{t}")
    assert_nothing_of_a_reaches_b(rr)  # 4 namespaces hold them: still withheld
    teach(rr, "A4")
    seen, unseen, both = probe(rr)  # 5 namespaces: the pooled evidence applies
    assert seen.score > unseen.score
    assert seen.signals["usefulness"] > unseen.signals["usefulness"]
    assert both[0].id == "b1"


def test_with_a_threshold_of_one_the_pool_transfers_rare_labels_as_before(state):
    rr = Reranker(state, config=Config(learning=Learning(pooled_min_namespaces=1), refit=Refit(every=0)))
    teach(rr, "A0")
    seen, unseen, _ = probe(rr)
    assert seen.score > unseen.score


def test_the_credit_of_a_feedback_reads_the_masked_counts(make_state):
    """B's feedback on a candidate with A's rare values credits its features exactly as it
    does in a state where A used other values (so every codebook count is the same), read
    through a fresh reranker (the counts come from the state, not from what the rerank kept);
    B's ``links()`` show the same numbers in both."""
    learned = []
    for taught in (RARE, ("blorp", "xyz-crm")):
        state = make_state()
        rr = Reranker(state, config=CONFIG)
        teach(rr, "A0", taught)
        ranking = rr.rerank(QUERY, [candidate("c1", *RARE),
                                    {"id": "c2", "text": "ok", "score": 0.5}], namespace="B")
        Reranker(state, config=CONFIG).feedback(ranking.recall_id, used=["c1"], namespace="B")
        learned.append({link.feature: link for link in rr.links("B")})
    with_a, without_a = learned
    assert with_a.keys() == without_a.keys()
    for feature in (f"kind:{RARE[0]}", f"source:{RARE[1]}", f"qt:when&kind:{RARE[0]}"):
        mine, alone = with_a[feature], without_a[feature]
        assert (mine.pos, mine.neg) == pytest.approx((alone.pos, alone.neg), rel=1e-6)
        assert (mine.p, mine.low, mine.high) == pytest.approx((alone.p, alone.low, alone.high),
                                                              rel=1e-6)


def test_without_the_rule_the_credit_follows_the_other_tenants_counts(make_state):
    """The check above can fail: with a threshold of 1, A's use of the same values changes
    B's credit."""
    learned = []
    for taught in (RARE, ("blorp", "xyz-crm")):
        state = make_state()
        rr = Reranker(state, config=Config(learning=Learning(pooled_min_namespaces=1), refit=Refit(every=0)))
        teach(rr, "A0", taught)
        ranking = rr.rerank(QUERY, [candidate("c1", *RARE),
                                    {"id": "c2", "text": "ok", "score": 0.5}], namespace="B")
        rr.feedback(ranking.recall_id, used=["c1"])
        learned.append(next(link for link in rr.links("B") if link.feature == f"kind:{RARE[0]}"))
    assert learned[0].pos != pytest.approx(learned[1].pos, rel=1e-3)
