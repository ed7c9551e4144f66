"""Round trips per answer (a rerank and its feedback, through ``Reranker``): at most 4 on one
server and 5 in a Cluster, counted where the client sends each request (a pipeline, to one node
or several at once, is one round trip), batched pushes and prunes included. A rerank reads once
and writes its impression; a feedback reads the used items' links (its EM credit is worked out
in Python from them: Redis has no version under which the rerank's read could be kept) and
applies its update in one script."""

from __future__ import annotations

import pytest

from heaprank import Reranker
from heaprank.state.redis import RedisState
from tests.integration.redis_servers import unique_prefix

NOW = 1_750_000_000.0
CANDIDATES = [{"id": f"m{j}", "text": f"My flight to Lisbon is on March {j}", "score": 10.0 - j,
               "metadata": {"kind": ("fact", "note", "event")[j % 3], "source": "user"}}
              for j in range(20)]


def count_round_trips(state: RedisState) -> list[int]:
    """Wrap the state's sender: the returned list's one entry counts the requests it sends."""
    sent = [0]
    send = state._send

    def counting(request, client=None):  # type: ignore[no-untyped-def]
        sent[0] += 1
        return send(request, client)
    state._send = counting  # type: ignore[method-assign]
    return sent


@pytest.mark.parametrize("kind, limit", [("redis", 4), ("redis-cluster", 5)])
def test_an_answer_takes_at_most_its_round_trips(kind, limit, request):
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    state = RedisState(url, prefix=unique_prefix())
    rr = Reranker(state)
    try:
        namespaces = [f"user{i}" for i in range(8)]
        for ns in namespaces:  # warm: scripts, the registry, the pooled cache
            r = rr.rerank("When is my flight?", CANDIDATES, namespace=ns, k=5, now=NOW)
            rr.feedback(r.recall_id, used=[r.ids[0]])
        sent = count_round_trips(state)
        answers = 64
        for i in range(answers):
            r = rr.rerank("When is my flight?", CANDIDATES, namespace=namespaces[i % 8], k=5,
                          now=NOW)
            rr.feedback(r.recall_id, used=[r.ids[i % 3]])
        per_answer = sent[0] / answers
        print(f"{kind}: {per_answer:.2f} round trips per rerank + feedback")
        assert per_answer <= limit
    finally:
        state.clear()
        rr.close()
