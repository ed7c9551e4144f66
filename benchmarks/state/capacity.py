"""The Redis capacity figures of ``python -m benchmarks backends`` (issue 23), each against its
target: footprint per link, namespace and impression (``used_memory`` deltas of states loaded
through the public API), distinct Cluster slots of 10,000 namespaces, the hottest key's share
of key accesses (MONITOR over a rerank + feedback workload on 1,000 namespaces), round trips per
answer, answers per second with the per-master CPU split of a 3-master Cluster."""

from __future__ import annotations

import multiprocessing
import random
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

NOW = 1_750_000_000.0
QUESTIONS = ("When is my flight?", "Who is Maya?", "Where does Ben live?", "How much is rent?")
KINDS = ("fact", "preference", "event", "tool_result", "note")
SOURCES = ("user", "assistant", "tool")


def candidates(ns: int, n: int = 50) -> list[dict[str, Any]]:
    rng = random.Random(ns)
    return [{"id": f"user{ns % 100:02d}/m{j:05d}", "text": f"Note {rng.randrange(99)} about "
             f"{rng.choice(('Lisbon', 'Maya', 'rent', 'the build'))} on March {rng.randrange(1, 30)}",
             "score": rng.uniform(0, 10),
             "metadata": {"kind": rng.choice(KINDS), "source": rng.choice(SOURCES),
                          "created_at": NOW - rng.uniform(0, 90 * 86_400)}} for j in range(n)]


def _used(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


FEATURES = [f"qt:{q}&kind:k{i:02d}" for q in ("when", "who") for i in range(50)]


def feed_namespace(state: Any, i: int, open_impression: bool = False) -> None:
    """Namespace ``user:{i}``'s 100 links through ``apply`` (one feedback of 10 shown items x
    10 features, 1 used); with ``open_impression`` one more impression, left unfed."""
    from heaprank.records import Impression, new_recall_id

    from .fill import update_of

    ns = f"user:{i:06d}"
    ids = tuple(f"user{i % 100:02d}/m{k:05d}" for k in range(10))
    for fed in (True, False) if open_impression else (True,):
        rid = new_recall_id()
        imp = Impression(recall_id=rid, namespace=ns, qtype="other", time=NOW, time_explicit=True,
                         ids=ids, slots=tuple(("kind:none",) for _ in ids))
        state.put_impression(imp)
        if fed:
            state.apply([update_of(imp, [FEATURES[10 * k:10 * k + 10] for k in range(10)],
                                   [k == 0 for k in range(10)])])


def load_links(url: str, prefix: str, namespaces: int) -> dict[str, Any]:
    """``namespaces`` x 100 links through ``apply`` (:func:`feed_namespace`), fed
    impressions pruned: ``used_memory`` per namespace and link."""
    import redis

    from heaprank.state.redis import RedisState
    from heaprank.state.redis.layout import key_slot

    client = redis.Redis.from_url(url)
    state = RedisState(url, prefix=prefix, max_impressions=1)
    before = _used(client)
    for i in range(namespaces):
        feed_namespace(state, i)
    state.prune()
    grown = _used(client) - before
    stats = state.stats()
    slots = len({key_slot(state.layout.ns_key("l", f"user:{i:06d}")) for i in range(namespaces)})
    state.clear()
    state.close()
    client.close()
    per_ns = grown / namespaces
    return {"namespaces": namespaces, "links": stats["links"], "bytes_per_namespace": per_ns,
            "bytes_per_link": grown / max(stats["links"], 1), "slots": slots,
            "million_x_100_bytes": per_ns * 1e6 * 100 / (stats["links"] / namespaces)}


def impression_bytes(url: str, prefix: str, n: int, namespaces: int = 20) -> dict[str, float]:
    """``used_memory`` per impression of a rerank of 50 candidates with k=10 over ``namespaces``
    namespaces, open and after its feedback: everything the impressions add (their fields, the
    hashes' keys, tables and expiry, their zset entries), the state a feedback adds
    too. With 20 namespaces each bucket's hash holds n/20 impressions; with one namespace per
    impression each open one pays a hash of its own (fed ones join their hour's hash, which
    each namespace's warm-up impression started)."""
    import redis

    from heaprank import Reranker
    from heaprank.state.redis import RedisState

    client = redis.Redis.from_url(url)
    state = RedisState(url, prefix=prefix, max_impressions=10 * n)
    rr = Reranker(state)
    pools = [candidates(ns) for ns in range(20)]
    warm = [rr.rerank(QUESTIONS[0], pools[i % 20], namespace=f"u{i}", k=10, now=NOW)
            for i in range(max(20, namespaces))]  # (each namespace learns before: not counted)
    for r in warm:
        rr.feedback(r.recall_id, used=[r.ids[0]])
    before = _used(client)
    made = [rr.rerank(QUESTIONS[i % 4], pools[i % 20], namespace=f"u{i % namespaces}", k=10,
                      now=NOW) for i in range(n)]
    opened = _used(client)
    for r in made:
        rr.feedback(r.recall_id, used=[r.ids[1]])
    fed = _used(client)
    state.clear()
    rr.close()
    client.close()
    return {"open": (opened - before) / n, "fed": (fed - before) / n, "namespaces": namespaces}


def _answers(url: str, proc: int, answers: int, namespaces: int, start_at: float) -> tuple[int, float]:
    from heaprank import Reranker

    rng = random.Random(proc)
    rr = Reranker(url)
    pools = [candidates(ns) for ns in range(10)]
    for i in range(20):  # warm: scripts, connections
        r = rr.rerank(QUESTIONS[0], pools[i % 10], namespace=f"t{rng.randrange(namespaces)}", k=10,
                      now=NOW)
        rr.feedback(r.recall_id, used=[r.ids[0]])
    time.sleep(max(0.0, start_at - time.time()))
    t0 = time.perf_counter()
    for i in range(answers):
        r = rr.rerank(QUESTIONS[i % 4], pools[i % 10], namespace=f"t{rng.randrange(namespaces)}",
                      k=10, now=NOW)
        rr.feedback(r.recall_id, used=[r.ids[rng.randrange(3)]])
    elapsed = time.perf_counter() - t0
    rr.close()
    return answers, elapsed


def _cpu(port: int) -> float:
    import redis

    c = redis.Redis(port=port)
    cpu = c.info("cpu")
    c.close()
    return float(cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"])


def throughput(url: str, ports: list[int], procs: int, answers: int) -> dict[str, Any]:
    """Answers (rerank + feedback) per second of ``procs`` processes over 1,000 namespaces, and
    each server's share of the servers' main-thread CPU meanwhile."""
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 3.0 + 0.5 * procs
    with ctx.Pool(procs) as pool:
        pending = pool.starmap_async(_answers, [(url, p, answers, 1_000, start_at)
                                                for p in range(procs)])
        time.sleep(max(0.0, start_at - time.time()))
        before = [_cpu(p) for p in ports]
        rows = pending.get(600)
        after = [_cpu(p) for p in ports]
    used = [a - b for a, b in zip(after, before)]
    total = sum(rows[i][0] for i in range(procs))
    wall = max(r[1] for r in rows)
    return {"procs": procs, "answers": total, "answers_per_s": total / wall,
            "cpu_split": [u / max(sum(used), 1e-9) for u in used],
            "server_us_per_answer": sum(used) * 1e6 / total}


def _keys_of(parts: list[str]) -> list[str]:
    """The keys one MONITOR line's command touches (every argument of DEL/EXISTS, else the
    first); none for scripts (their commands show as lines of their own)."""
    if not parts:
        return []
    name = parts[0].upper()
    if name in ("EVALSHA", "EVAL", "SCRIPT", "INFO", "PING", "MONITOR", "CLIENT", "HELLO",
                "CONFIG", "SELECT", "CLUSTER", "COMMAND"):
        return []
    if name in ("DEL", "EXISTS", "UNLINK", "MGET"):
        return parts[1:]
    return parts[1:2]


def hottest_key(url: str, port: int, prefix: str, answers: int) -> dict[str, Any]:
    """MONITOR a rerank + feedback workload over 1,000 namespaces: each key's share of the key
    accesses (commands a script runs included)."""
    import shlex

    from heaprank import Reranker

    out = Path(f"/tmp/heaprank-monitor-{port}.txt")
    rr = Reranker(f"{url}?prefix={prefix}")
    rng = random.Random(3)
    pools = [candidates(ns) for ns in range(10)]
    for i in range(200):
        r = rr.rerank(QUESTIONS[i % 4], pools[i % 10], namespace=f"t{rng.randrange(1000)}", k=10,
                      now=NOW)
        rr.feedback(r.recall_id, used=[r.ids[0]])
    with out.open("w") as fh:
        monitor = subprocess.Popen(["redis-cli", "-p", str(port), "monitor"], stdout=fh)
        time.sleep(0.5)
        for i in range(answers):
            r = rr.rerank(QUESTIONS[i % 4], pools[i % 10], namespace=f"t{rng.randrange(1000)}",
                          k=10, now=NOW)
            rr.feedback(r.recall_id, used=[r.ids[rng.randrange(3)]])
        time.sleep(0.5)
        monitor.terminate()
        monitor.wait()
    counts: Counter[str] = Counter()
    for line in out.read_text(errors="replace").splitlines():
        head = line.find("] ")
        if head < 0:
            continue
        try:
            parts = shlex.split(line[head + 2:])
        except ValueError:
            continue
        counts.update(k for k in _keys_of(parts) if k.startswith(prefix))
    out.unlink()
    rr.state.clear()  # type: ignore[attr-defined]
    rr.close()
    total = sum(counts.values())
    key, hits = counts.most_common(1)[0]
    return {"accesses": total, "keys": len(counts), "hottest": key.replace(prefix, "P"),
            "share": hits / total, "top": [(k.replace(prefix, "P"), n / total)
                                           for k, n in counts.most_common(4)]}


def round_trips(url: str, answers: int = 64) -> float:
    """Requests the state sends per rerank + feedback (a pipeline, to one node or several, is
    one), after a warm-up; batched pushes and prunes included."""
    from heaprank import Reranker
    from heaprank.state.redis import RedisState
    from heaprank.state.redis.layout import redis_options

    base, options = redis_options(url)
    state = RedisState(base, **options)
    rr = Reranker(state)
    pools = [candidates(ns) for ns in range(8)]
    for i in range(16):
        r = rr.rerank(QUESTIONS[0], pools[i % 8], namespace=f"rt{i % 8}", k=10, now=NOW)
        rr.feedback(r.recall_id, used=[r.ids[0]])
    sent = [0]
    send = state._send

    def counting(request: Any, client: Any = None) -> Any:
        sent[0] += 1
        return send(request, client)
    state._send = counting  # type: ignore[method-assign]
    for i in range(answers):
        r = rr.rerank(QUESTIONS[i % 4], pools[i % 8], namespace=f"rt{i % 8}", k=10, now=NOW)
        rr.feedback(r.recall_id, used=[r.ids[i % 3]])
    state.clear()
    rr.close()
    return sent[0] / answers
