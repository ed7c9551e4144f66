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

from .._accel import kernels
from .._time import DAY_S, feedback_time_ok
from ..errors import FeedbackError
from ..learning import links as linkmath
from ..records import (
    DocStats,
    FeedbackBatch,
    FeedbackItem,
    FeedbackOutcome,
    Impression,
    LinkCounts,
    UsedFeedback,
    new_outcome,
    recall_born_s,
)
from . import codec, edges
from .base import CreditFn, check_resolution, merge_last_used, new_verdicts
from .memory_learning import Fresh, LeanLearner
from .memory_links import LinkTable, Namespace

_KERNELS = kernels("state")
#: ``_state.doc_stats`` (the documents' use records in one C pass), or None
doc_stats_kernel = None if _KERNELS is None else _KERNELS.doc_stats

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

    #: Its impressions live in this process (see :class:`~heaprank.state.capabilities.LocalImpressions`).
    impressions_in_process: Literal[True] = True

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
        self._learner = LeanLearner(self._links)
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
        if doc_stats_kernel is not None:
            both = doc_stats_kernel(ns.docs, ids)
            if both is not None:  # every last use, then every count
                block = np.frombuffer(both, dtype=np.float64).reshape(2, len(ids))
                return DocStats(block[0], block[1])
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
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, edges.EdgeRows]:
        with self._lock:
            ns = self._links.ns.get(namespace)
            among = edges.EdgeRows.empty() if ns is None or not ns.edges else \
                edges.among(ids, ns.edges.get)
            return self._links.counts(namespace, features), self._docs(namespace, ids), among

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        with self._lock:
            ns = self._links.ns.get(namespace)
            return [] if ns is None else sorted(
                (a, b, row[0], row[1], row[2]) for a, nbrs in ns.edges.items()
                for b, row in nbrs.items() if a < b)

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

    def apply_feedback(self, batch: FeedbackBatch, credit: CreditFn) -> FeedbackOutcome:
        """Apply one feedback (see :class:`~heaprank.StateBackend`). The credit is computed
        here on integer feature ids with the batch's learning settings
        (:func:`heaprank.learning.links.credit_ids`, the same numbers as ``credit`` gives), so
        ``credit`` itself is not called."""
        with self._lock:
            entry = self._entry(batch.recall_id)
            if entry is None or entry[0].name != batch.namespace:
                raise FeedbackError(f"recall_id {batch.recall_id!r}: unknown (never recorded, "
                                    f"expired or pruned)")
            ns, body = entry
            verdicts = codec.verdicts_of(body)
            todo, done = check_resolution(batch, verdicts)
            if todo:
                # The means the rerank read still hold while no count has changed since.
                means = batch.means if batch.means_version is not None \
                    and batch.means_version == self.version else {}

                def p_of(item: FeedbackItem, ids: Sequence[int]) -> np.ndarray:
                    read = means.get(item.rank)
                    if read is not None and len(read) == len(ids):
                        return read
                    return self._links.posterior_mean(ns, ids, batch)

                idx, dpos, dneg = linkmath.credit_ids(todo, self._learner.row_ids, p_of,
                                                      em=batch.em)
                self._links.add(ns, idx, dpos, dneg)
                for item in todo:
                    if item.used:
                        last, uses = ns.docs.get(item.id, (math.nan, 0.0))
                        ns.docs[item.id] = (merge_last_used(last, batch.time), uses + 1.0)
                if batch.co_use is not None:
                    pairs = edges.co_use_pairs(batch.shown, verdicts, todo, batch.co_use.max_rank)
                    if pairs:
                        ns.edge_count = edges.update(ns.edges, ns.edge_count, pairs, batch.time,
                                                     batch.co_use, lambda: ns.edges)[0]
                body = codec.with_verdicts(body, new_verdicts(verdicts, len(verdicts), todo))
                self._open.pop(batch.recall_id, None)
                self._shown.pop(batch.recall_id, None)
                self._fed[batch.recall_id] = (ns, body)
                self._feedbacks[ns.name] = self._feedbacks.get(ns.name, 0) + 1
        return FeedbackOutcome(batch.recall_id, tuple(i.id for i in todo), tuple(done))

    def apply_used(self, request: UsedFeedback) -> FeedbackOutcome | None:
        """``feedback(recall_id, used)`` on a recall that has had no feedback yet, straight
        from the impression as written: the same counts, bit for bit, as :meth:`apply_feedback`
        with the reranker's batch, without building the batch (see :class:`UsedFeedback`).
        Returns ``None`` where the general path must run (the recall is not a fresh one of
        this namespace, an id was not shown): that path then applies it or raises the error,
        so both paths keep one set of checks and messages.
        """
        recall_id, namespace, used, read = (request.recall_id, request.namespace, request.used,
                                            request.read)
        with self._lock:
            shown = self._shown.get(recall_id)
            entry = self._open.get(recall_id)
            if shown is None or entry is None:
                return None
            ns, body = entry
            qtype, t, explicit, ids, slots, doc_features, _ = shown
            if (namespace is not None and ns.name != namespace) \
                    or not all(map(ids.__contains__, used)):
                return None
            when = request.time
            if when is None:
                when = t if explicit else time.time()
            if not feedback_time_ok(when, t):
                return None  # refused by the general path
            used_at = set(used)
            kept = read[1:] if read is not None and read[0] == self._links.version else None
            self._learner.make_room(len(ids))
            verdicts = self._learner.credit(Fresh(ns, ids, slots, qtype, doc_features, used_at,
                                                  kept, request))
            docs = ns.docs
            for d in ids:  # in shown order, as the general path records them
                if d in used_at:
                    last, uses = docs.get(d, (math.nan, 0.0))
                    docs[d] = (merge_last_used(last, when), uses + 1.0)
            del self._open[recall_id]
            del self._shown[recall_id]
            self._fed[recall_id] = (ns, codec.with_verdicts(body, verdicts))
            self._feedbacks[ns.name] = self._feedbacks.get(ns.name, 0) + 1
        return new_outcome(recall_id, ids, ())

    # ------------------------------------------------------------------ audit

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        with self._lock:
            return self._links.list_links(namespace)

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(n for n, ns in self._links.ns.items() if len(ns.fids) or ns.docs)

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        with self._lock:
            self._learner.clear()  # its feature names and doc ids, and ids about to be reused
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
