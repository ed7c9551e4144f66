"""Impression logs drawn from a known conditional-logit model, for the tuning and replay tests.

Each impression shows ``k`` items with random signal values; the used item is drawn with
probability ``softmax(sum_s w_s log s)`` under the true weights (recency from the age with the
true half-life), so a correct fit must find those weights again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from heaprank import Config, Refit, Reranker, StateBackend
from heaprank.records import Impression, new_recall_id
from heaprank.state import codec

DAY = 86_400.0
NOW = 1_750_000_000.0
COLUMNS = ("relevance", "age_days", "importance", "usefulness", "rules")
SLOTS = ("kind:fact", "len:<=10")


def synthetic_log(n: int, *, relevance: float = 0.5, recency: float = 1.0, importance: float = 1.0,
                  usefulness: float = 2.5, half_life_days: float = 30.0, recency_floor: float = 0.9,
                  namespace: str = "ns", k: int = 8, seed: int = 0, start: float = NOW,
                  step_s: float = 60.0, reinforcement: float | None = None,
                  qtype: str = "when") -> list[Impression]:
    """``n`` impressions of ``namespace``, questions of type ``qtype``, one every ``step_s``
    seconds from ``start``; with ``reinforcement`` (its true weight) they carry a
    reinforcement column too."""
    rng = np.random.default_rng(seed)
    true = np.array([relevance, recency, importance, usefulness])
    out = []
    # Ids are drawn hundreds per millisecond here: two can share their 20 random bits, and a
    # state then refuses the second put (the reranker would redraw; these logs name their own).
    taken: set[str] = set()
    for i in range(n):
        rel = rng.uniform(0.02, 1.0, k)
        age = rng.exponential(20.0, k)
        imp = rng.choice([0.6, 0.8, 1.0, 1.3], k)
        use = rng.uniform(0.01, 0.6, k)
        rec = recency_floor + (1 - recency_floor) * 2 ** (-age / half_life_days)
        u = np.log(np.column_stack([rel, rec, imp, use])) @ true
        columns, values = COLUMNS, [rel, age, imp, use, np.ones(k)]
        if reinforcement is not None:
            reinforced = rng.uniform(1.0, 2.0, k)
            u = u + reinforcement * np.log(reinforced)
            columns, values = COLUMNS + ("reinforcement",), values + [reinforced]
        p = np.exp(u - u.max())
        chosen = rng.choice(k, p=p / p.sum())
        signals = np.column_stack(values).astype(np.float32)
        recall_id = new_recall_id()
        while recall_id in taken:
            recall_id = new_recall_id()
        taken.add(recall_id)
        out.append(Impression(
            recall_id=recall_id, namespace=namespace, qtype=qtype, time=start + i * step_s,
            time_explicit=True, ids=tuple(f"{namespace}-{i}-{j}" for j in range(k)),
            slots=(SLOTS,) * k, signal_names=columns, signals=tuple(map(tuple, signals.tolist())),
            verdicts=tuple(codec.USED if j == chosen else codec.IGNORED for j in range(k))))
    return out


def record(state: StateBackend, impressions: Iterable[Impression]) -> None:
    """Write impressions into a real state as a reranker would: the impression, then feedback
    naming its used items (the verdicts the impressions carry). No continuous re-fit runs
    meanwhile: the state keeps no fitted weights."""
    rr = Reranker(state, config=Config(refit=Refit(every=0)))
    requests: list[tuple[str, Sequence[str]]] = []
    for imp in impressions:
        held = state.put_impression(Impression(
            recall_id=imp.recall_id, namespace=imp.namespace, qtype=imp.qtype, time=imp.time,
            time_explicit=imp.time_explicit, ids=imp.ids, slots=imp.slots,
            signal_names=imp.signal_names, signals=imp.signals))
        assert held == imp.recall_id
        requests.append((imp.recall_id, [i for i, v in zip(imp.ids, imp.verdicts)
                                         if v == codec.USED]))
    for outcome in rr.feedback_many(requests):
        assert not isinstance(outcome, Exception), outcome
