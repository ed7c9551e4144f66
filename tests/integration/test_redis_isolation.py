"""Isolation, enforced by the server: a Redis user whose ACL admits only alice's keys, the global
layer, the recall-id pointers and its bucket's impression hashes ranks, learns and reads for
alice; the same user touching bob's keys is refused. So one namespace's keys are never read for
another except through the pool."""

from __future__ import annotations

import uuid

import pytest

from heaprank import Reranker, StateUnavailableError
from heaprank.state.redis import RedisState
from tests.integration.redis_servers import unique_prefix

NOW = 1_750_000_000.0
CANDIDATES = [{"id": "lisbon", "text": "My flight to Lisbon is on March 3", "score": 7.3,
               "metadata": {"kind": "fact"}},
              {"id": "seat", "text": "I prefer window seats", "score": 5.1},
              {"id": "chat", "text": "ok", "score": 1.0}]


def test_a_namespace_reads_only_its_own_keys_and_the_global_layer(redis_url):
    import redis

    prefix = unique_prefix()
    admin_state = RedisState(redis_url, prefix=prefix)
    admin = redis.Redis.from_url(redis_url)
    user, password = f"hr-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    try:
        teacher = Reranker(admin_state)
        for ns in ("bob", "alice"):  # bob teaches the pool; alice has a history of her own
            r = teacher.rerank("When is my flight?", CANDIDATES, namespace=ns, k=3, now=NOW)
            teacher.feedback(r.recall_id, used=["lisbon"])
        rules = [f"~{prefix}:{{*}}:{kind}:alice" for kind in "ldxe"]
        rules += [f"~{prefix}:{{*}}:i:alice:*", *(f"~{prefix}:{{*}}:{kind}" for kind in "gmnfocqbr")]
        # (impressions are fields of their bucket's hours' hashes, shared by its namespaces)
        rules += [f"~{prefix}:{{*}}:{kind}" for kind in ("ho", "hf", "h:*", "k:*")]
        admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=[
            *rules, f"~{prefix}:r:*", f"~{prefix}:meta"], commands=["+@all"])
        url = redis_url.replace("redis://", f"redis://{user}:{password}@", 1)
        alice_only = RedisState(url, prefix=prefix)
        rr = Reranker(alice_only, strict=True)
        ranking = rr.rerank("When is my flight?", CANDIDATES, namespace="alice", k=3, now=NOW)
        priors = Reranker().rerank("When is my flight?", CANDIDATES, namespace="alice", k=3, now=NOW)
        learned = ranking.items[0].signals["usefulness"]
        assert learned > priors.items[0].signals["usefulness"]  # the state was read, not priors
        assert rr.feedback(ranking.recall_id, used=["lisbon"]).applied
        assert alice_only.list_links("alice")[0] and alice_only.list_links(None)[0]
        # The same user is refused bob's keys: the ACL does bite.
        with pytest.raises(StateUnavailableError, match="NOPERM|permission"):
            rr.rerank("When is my flight?", CANDIDATES, namespace="bob", k=3, now=NOW)
        alice_only.close()
    finally:
        admin.acl_deluser(user)
        admin.close()
        admin_state.clear()
        admin_state.close()
