"""In-memory state: dicts under one lock. The reference every other backend is tested against."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .base import (
    CreditFn,
    DocStats,
    FeedbackBatch,
    FeedbackOutcome,
    Impression,
    LinkCounts,
    check_resolution,
)


class MemoryState:
    """Learned state in this process only; gone when it exits.

    Args:
        max_impressions: How many impressions to keep (oldest dropped first). Large by default:
            feedback may arrive long after the rerank.
    """

    def __init__(self, *, max_impressions: int = 1_000_000) -> None:
        if max_impressions < 1:
            raise ValueError("max_impressions: must be >= 1")
        self.max_impressions = max_impressions
        self._lock = threading.RLock()
        self._links: dict[str, dict[str, list[float]]] = defaultdict(dict)
        self._global: dict[str, list[float]] = {}
        self._docs: dict[str, dict[str, list[float]]] = defaultdict(dict)
        self._impressions: OrderedDict[str, Impression] = OrderedDict()
        self._resolved: dict[str, dict[str, bool]] = {}
        self._feedbacks = 0

    def __repr__(self) -> str:
        return "MemoryState()"

    def _counts(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        own = self._links.get(namespace, {})
        zero = (0.0, 0.0)
        mine = [own.get(f, zero) for f in features]
        glob = [self._global.get(f, zero) for f in features]
        arr = np.array(mine, dtype=np.float64).reshape(-1, 2)
        garr = np.array(glob, dtype=np.float64).reshape(-1, 2)
        return LinkCounts(arr[:, 0].copy(), arr[:, 1].copy(), garr[:, 0].copy(), garr[:, 1].copy())

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        with self._lock:
            return self._counts(namespace, features)

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        with self._lock:
            docs = self._docs.get(namespace, {})
            rows = np.array([docs.get(i, (math.nan, 0.0, 0.0)) for i in ids],
                            dtype=np.float64).reshape(-1, 3)
        return DocStats(rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].copy())

    def put_impression(self, impression: Impression) -> None:
        with self._lock:
            if impression.recall_id in self._impressions:
                return  # first write wins, as in every backend
            self._impressions[impression.recall_id] = replace(impression, resolved={})
            while len(self._impressions) > self.max_impressions:
                old, _ = self._impressions.popitem(last=False)
                self._resolved.pop(old, None)

    def get_impression(self, recall_id: str) -> Impression | None:
        with self._lock:
            imp = self._impressions.get(recall_id)
            if imp is None:
                return None
            return replace(imp, resolved=dict(self._resolved.get(recall_id, {})))

    def apply_feedback(self, batch: FeedbackBatch, credit: CreditFn) -> FeedbackOutcome:
        with self._lock:
            resolved = self._resolved.setdefault(batch.recall_id, {})
            todo, done = check_resolution(batch, resolved)
            if todo:
                features, dpos, dneg = credit(lambda fs: self._counts(batch.namespace, fs), todo)
                own = self._links[batch.namespace]
                for f, dp, dn in zip(features, dpos.tolist(), dneg.tolist()):
                    row = own.setdefault(f, [0.0, 0.0])
                    row[0] += dp
                    row[1] += dn
                    grow = self._global.setdefault(f, [0.0, 0.0])
                    grow[0] += dp
                    grow[1] += dn
                docs = self._docs[batch.namespace]
                for item in todo:
                    stats = docs.setdefault(item.id, [math.nan, 0.0, 0.0])
                    if item.used:
                        stats[0] = batch.time if math.isnan(stats[0]) else max(stats[0], batch.time)
                        stats[1] += 1.0
                    else:
                        stats[2] += 1.0
                    resolved[item.id] = item.used
                self._feedbacks += 1
        return FeedbackOutcome(batch.recall_id, tuple(i.id for i in todo), tuple(done))

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        with self._lock:
            table = self._global if namespace is None else self._links.get(namespace, {})
            features = sorted(table)
            rows = np.array([table[f] for f in features], dtype=np.float64).reshape(-1, 2)
        return features, rows[:, 0].copy(), rows[:, 1].copy()

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(set(self._links) | set(self._docs))

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        with self._lock:
            own = self._links.pop(namespace, {})
            if scrub_global:
                for f, (p, n) in own.items():
                    grow = self._global.get(f)
                    if grow is not None:
                        grow[0] = max(grow[0] - p, 0.0)
                        grow[1] = max(grow[1] - n, 0.0)
            self._docs.pop(namespace, None)
            for rid in [r for r, imp in self._impressions.items() if imp.namespace == namespace]:
                del self._impressions[rid]
                self._resolved.pop(rid, None)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "namespaces": len(self.namespaces()),
                "links": sum(len(t) for t in self._links.values()),
                "global_links": len(self._global),
                "documents": sum(len(d) for d in self._docs.values()),
                "impressions": len(self._impressions),
                "feedbacks": self._feedbacks,
            }

    def close(self) -> None:
        """Nothing to release; present for the Protocol."""

    def __enter__(self) -> MemoryState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
