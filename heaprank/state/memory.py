"""In-memory state under one lock: the reference every other backend is tested against.

Compact on purpose: feature names are interned once (global arrays of counts indexed by feature
id), a namespace keeps sorted feature ids with two float arrays, documents get a row only once
used, and impressions are kept in their binary form (:mod:`heaprank.state.codec`).
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Literal

import numpy as np

from .._time import DAY_S
from ..model import co_use
from ..model.evidence import DocStats, EdgeRows, LinkCounts
from ..records import EdgeChange, EdgeState, Impression, Update, recall_born_s
from . import codec
from .base import merge_last_used, still_open, with_codes
from .memory_links import LinkTable, Namespace

_PRUNE_EVERY = 256
_SHOWN_CACHE = 4_096  # latest impressions kept as written, besides their stored bytes


#: An impression as written, but its signals and verdicts: (qtype, time, time given by the
#: caller, ids, slots, doc features, signal names).
_Shown = tuple[str, float, bool, tuple[str, ...], tuple[tuple[str, ...], ...], bool, tuple[str, ...]]


class MemoryState:
    """Learned state in this process only; gone when it exits.

    Args:
        max_impressions: How many impressions that received feedback to keep (oldest dropped
            first): they are what tuning and replay read.
        impression_ttl_s: Impressions that never received feedback expire after this long
            (wall clock), one day by default.
        max_open_impressions: How many impressions still waiting for feedback to keep, 100,000
            by default (each costs about a kilobyte): past it the oldest is dropped at once, and
            feedback for it then reports an unknown recall. Without it, tracked reranks that
            never get feedback would hold memory for a whole ``impression_ttl_s``. A namespace
            that only dropped impressions held (none of its links or documents) goes with
            them. ``stats()`` shows ``open_impressions`` and ``max_open_impressions``; the
            ``memory://`` URL takes ``?max_open_impressions=``, ``max_impressions=`` and
            ``impression_ttl=`` (seconds).
    """

    #: It applies a list of updates under one lock (see :class:`~heaprank.state.capabilities.GroupCommit`).
    group_commit: Literal[True] = True

    def __init__(self, *, max_impressions: int = 100_000, impression_ttl_s: float = DAY_S,
                 max_open_impressions: int = 100_000) -> None:
        for name, value in (("max_impressions", max_impressions),
                            ("max_open_impressions", max_open_impressions)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be an int >= 1")
        if not (isinstance(impression_ttl_s, (int, float)) and impression_ttl_s > 0):
            raise ValueError("impression_ttl_s: must be > 0")
        self.max_impressions = max_impressions
        self.max_open_impressions = max_open_impressions
        self.impression_ttl_s = float(impression_ttl_s)
        self._lock = threading.RLock()
        self._links = LinkTable()
        self._open: dict[str, tuple[Namespace, bytes]] = {}  # no feedback yet, oldest first
        self._fed: dict[str, tuple[Namespace, bytes]] = {}  # in order of first feedback
        self._explicit: dict[tuple[str, str], str] = {}  # (namespace, feedback id) -> recall id
        self._held: dict[str, int] = {}  # impressions (open or fed) each namespace holds
        self._puts = 0
        self._feedbacks: dict[str, int] = {}  # feedbacks applied, by namespace
        # What the latest impressions showed, as written: feedback follows a rerank closely,
        # and reads them without decoding (bounded; dropped at feedback and when forgotten).
        self._shown: dict[str, _Shown] = {}
        self._weights: tuple[int, str] | None = None  # (version, record): see state.weights

    @property
    def version(self) -> int:
        """Bumped by every change of the link counts: a reader may keep what it derived from
        them while the version stands (Reranker does, per set of feature rows)."""
        return self._links.version

    def __repr__(self) -> str:
        return "MemoryState()"

    # ------------------------------------------------------------------ links

    def _docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        ns = self._links.ns.get(namespace)
        if ns is None or not ns.docs:
            return DocStats(np.full(len(ids), math.nan), np.zeros(len(ids)))
        # (last used, use count) of each id, flat: one C-level pass, no list of pairs
        flat = np.fromiter(itertools.chain.from_iterable(
            map(ns.docs.get, ids, itertools.repeat((math.nan, 0.0)))), dtype=np.float64,
            count=2 * len(ids))
        return DocStats(flat[0::2].copy(), flat[1::2].copy())

    def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        with self._lock:
            return self._links.counts(namespace, features)

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        with self._lock:
            return self._docs(namespace, ids)

    def read(self, namespace: str, features: Sequence[str],
             ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        with self._lock:
            return self._links.counts(namespace, features), self._docs(namespace, ids)

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        with self._lock:
            ns = self._links.ns.get(namespace)
            among = EdgeRows.empty() if ns is None or not ns.edges else \
                co_use.among(ids, ns.edges.get)
            return self._links.counts(namespace, features), self._docs(namespace, ids), among

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        with self._lock:
            ns = self._links.ns.get(namespace)
            return [] if ns is None else sorted(
                (a, b, row[0], row[1], row[2]) for a, nbrs in ns.edges.items()
                for b, row in nbrs.items() if a < b)

    def edge_state(self, namespace: str, docs: Sequence[str]) -> EdgeState:
        """The edges of ``docs`` in ``namespace`` (copies), their version and the namespace's
        edge count."""
        with self._lock:
            ns = self._links.ns.get(namespace)
            if ns is None:
                return EdgeState(0, 0, {})
            rows = {(min(a, b), max(a, b)): row for a in docs
                    for b, row in ns.edges.get(a, {}).items()}
            return EdgeState(ns.edge_version, ns.edge_count, co_use.adjacency(
                (a, b, row[0], row[1], row[2]) for (a, b), row in rows.items()))

    # ------------------------------------------------------------- impressions

    def put_impression(self, impression: Impression, *, feedback_id: str | None = None) -> str | None:
        body = codec.encode_impression(impression)
        shown: _Shown = (impression.qtype, impression.time, impression.time_explicit, impression.ids,
                 impression.slots, impression.doc_features, impression.signal_names)
        with self._lock:
            rid = impression.recall_id
            if feedback_id is not None:
                held = self._explicit.get((impression.namespace, feedback_id))
                if held is not None and (held in self._open or held in self._fed):
                    return held
            if rid in self._open or rid in self._fed:
                return None
            self._open[rid] = (self._links.namespace(impression.namespace), body)
            self._held[impression.namespace] = self._held.get(impression.namespace, 0) + 1
            self._shown[rid] = shown
            if len(self._shown) > _SHOWN_CACHE:
                del self._shown[next(iter(self._shown))]
            if len(self._open) > self.max_open_impressions:
                self._drop(self._open, next(iter(self._open)))
            if feedback_id is not None:
                self._explicit[(impression.namespace, feedback_id)] = rid
            self._puts += 1
            if self._puts % _PRUNE_EVERY == 1:
                self._prune()
            return rid

    def _drop(self, table: dict[str, tuple[Namespace, bytes]], rid: str) -> None:
        """Drop one impression (expired, or past a cap), and its namespace with it when that
        held nothing else: no other impression, no link, no document, no edge."""
        ns = table.pop(rid)[0]
        self._shown.pop(rid, None)
        left = self._held.get(ns.name, 1) - 1
        if left > 0:
            self._held[ns.name] = left
            return
        self._held.pop(ns.name, None)
        if not len(ns.fids) and not ns.docs and not ns.edges \
                and self._links.ns.get(ns.name) is ns:
            del self._links.ns[ns.name]

    def _prune(self) -> None:
        cutoff = time.time() - self.impression_ttl_s
        while self._open:
            rid = next(iter(self._open))
            if recall_born_s(rid) >= cutoff:
                break
            self._drop(self._open, rid)
        while len(self._fed) > self.max_impressions:
            self._drop(self._fed, next(iter(self._fed)))
        if len(self._explicit) > 2 * (len(self._open) + len(self._fed)) + 64:
            self._explicit = {k: r for k, r in self._explicit.items()
                              if r in self._open or r in self._fed}

    def prune(self) -> None:
        """Expire impressions now (normally done every few hundred writes)."""
        with self._lock:
            self._prune()

    def _entry(self, recall_id: str) -> tuple[Namespace, bytes] | None:
        return self._open.get(recall_id) or self._fed.get(recall_id)

    def get_impression(self, recall_id: str) -> Impression | None:
        with self._lock:
            entry = self._entry(recall_id)
            shown = self._shown.get(recall_id) if recall_id in self._open else None
        if entry is None:
            return None
        if shown is None:
            return codec.decode_impression(recall_id, entry[0].name, entry[1])
        # Recent and without feedback: all but the signals as written; the signals read back
        # from the stored bytes (float32), as a decoded impression has them.
        qtype, when, explicit, ids, slots, doc_features, names = shown
        body, n, m = entry[1], len(ids), len(names)
        signals = np.frombuffer(body, dtype="<f4", count=n * m, offset=len(body) - 4 * n * m)
        return Impression(recall_id=recall_id, namespace=entry[0].name, qtype=qtype, time=when,
                          time_explicit=explicit, ids=ids, slots=slots,
                          doc_features=doc_features, signal_names=names,
                          signals=tuple(map(tuple, signals.reshape(n, m).tolist())),
                          verdicts=(codec.OPEN,) * n)

    def feedback_log(self, namespace: str | None = None) -> Iterator[Impression]:
        """Impressions with feedback of ``namespace`` (``None``: all), oldest recall first."""
        with self._lock:  # a snapshot of the bodies; decoded outside the lock
            rows = sorted((rid, ns.name, body) for rid, (ns, body) in self._fed.items()
                          if namespace is None or ns.name == namespace)
        for rid, name, body in rows:
            yield codec.decode_impression(rid, name, body)

    # ---------------------------------------------------------------- feedback

    def apply(self, updates: Sequence[Update]) -> list[bool]:
        """Apply feedback updates (see :meth:`~heaprank.StateBackend.apply`), under the lock."""
        with self._lock:
            return [self._apply(update) for update in updates]

    def _apply(self, update: Update) -> bool:
        entry = self._entry(update.recall_id)
        if entry is None or entry[0].name != update.namespace:
            return False
        ns, body = entry
        verdicts = codec.verdicts_of(body)
        if not still_open(verdicts, update) or (
                update.edges is not None and update.edges.version != ns.edge_version):
            return False
        if len(update.features):
            self._links.add(ns, self._links.intern(update.features), update.dpos, update.dneg)
        for d in update.used:
            last, uses = ns.docs.get(d, (math.nan, 0.0))
            ns.docs[d] = (merge_last_used(last, update.time), uses + 1.0)
        if update.edges is not None:
            _change_edges(ns, update.edges)
        body = codec.with_verdicts(body, with_codes(verdicts, len(verdicts), update))
        self._open.pop(update.recall_id, None)
        self._shown.pop(update.recall_id, None)
        self._fed[update.recall_id] = (ns, body)
        self._feedbacks[ns.name] = self._feedbacks.get(ns.name, 0) + 1
        return True

    # ------------------------------------------------------------------ audit

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        with self._lock:
            return self._links.list_links(namespace)

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(n for n, ns in self._links.ns.items() if len(ns.fids) or ns.docs)

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        with self._lock:
            self._links.forget(namespace, scrub_global=scrub_global)
            for table in (self._open, self._fed):
                for rid in [r for r, (owner, _) in table.items() if owner.name == namespace]:
                    del table[rid]
                    self._shown.pop(rid, None)
            self._explicit = {k: r for k, r in self._explicit.items() if k[0] != namespace}
            self._feedbacks.pop(namespace, None)
            self._held.pop(namespace, None)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                # every namespace object held: with links or documents, or only impressions
                "namespaces": len(self._links.ns),
                "links": sum(len(ns.fids) for ns in self._links.ns.values()),
                "global_links": int(((self._links.gns > 0) & ~self._links.own).sum()),
                "documents": sum(len(ns.docs) for ns in self._links.ns.values()),
                "impressions": len(self._open) + len(self._fed),
                "feedbacks": sum(self._feedbacks.values()),
                "open_impressions": len(self._open),
                "max_open_impressions": self.max_open_impressions,
            }

    def read_weights(self) -> str | None:
        """The fitted weights' record (:mod:`heaprank.state.weights`), or None."""
        with self._lock:
            return None if self._weights is None else self._weights[1]

    def swap_weights(self, expected: int, version: int, record: str) -> bool:
        """Store ``record`` if the stored version is ``expected`` (0: none yet)."""
        with self._lock:
            if (0 if self._weights is None else self._weights[0]) != expected:
                return False
            self._weights = (version, record)
            return True

    def close(self) -> None:
        """Nothing to release; present for the Protocol."""

    def __enter__(self) -> MemoryState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------- export (state copy)

    def iter_docs(self, namespace: str) -> list[tuple[str, float, float]]:
        """``(id, last_used, use_count)`` of each used document of ``namespace``."""
        with self._lock:
            ns = self._links.ns.get(namespace)
            return [] if ns is None else [(i, last, uses) for i, (last, uses) in ns.docs.items()]

    def iter_impressions(self) -> list[tuple[str, str, bytes]]:
        """``(recall_id, namespace, codec bytes)`` of every live impression."""
        with self._lock:
            return [(rid, ns.name, body) for table in (self._open, self._fed)
                    for rid, (ns, body) in table.items()]


def _change_edges(ns: Namespace, change: EdgeChange) -> None:
    """Apply an edge change to a namespace's adjacency (each edge's list shared by its two
    documents)."""
    adj = ns.edges
    for a, b in change.deleted:
        for x, y in ((a, b), (b, a)):
            nbrs = adj.get(x)
            if nbrs is not None:
                nbrs.pop(y, None)
                if not nbrs:
                    del adj[x]
    for a, b, strength, count, last in change.written:
        row = [strength, count, last]
        adj.setdefault(a, {})[b] = row
        adj.setdefault(b, {})[a] = row
    ns.edge_count = change.total
    ns.edge_version += 1
