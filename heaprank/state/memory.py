"""In-memory state under one lock: the reference every other backend is tested against.

Compact on purpose: feature names are interned once (global arrays of counts indexed by feature
id), a namespace keeps sorted feature ids with two float arrays, documents get a row only once
used, and impressions are kept in their binary form (:mod:`heaprank.state.codec`).
"""

from __future__ import annotations

import itertools
import math
import operator
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import numpy as np

from .._accel import speedups
from .._time import DAY_S
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
    recall_born_s,
)
from ..scoring.features import expand_features
from . import codec, edges
from .base import CreditFn, check_resolution, merge_last_used, new_verdicts

#: The C kernels of a lean feedback's sums and of the documents' stats (None: numpy)
learn_kernel = None if speedups is None else speedups.learn_known
doc_kernel = None if speedups is None else speedups.doc_stats
#: The C kernel of apply_used's loop over the shown items (None: that loop in Python)
rows_kernel = None if speedups is None else speedups.shown_rows
_PRUNE_EVERY = 256
_ROW_CACHE = 65_536  # feature rows whose ids are cached (a few MB at most)
_SHOWN_CACHE = 4_096  # latest impressions kept as written, besides their stored bytes


#: An impression as written, but its signals and verdicts: (qtype, time, time given by the
#: caller, ids, slots, doc features, signal names).
_Shown = tuple[str, float, bool, tuple[str, ...], tuple[tuple[str, ...], ...], bool, tuple[str, ...]]


class _Row:
    """A feature row's ids, as a tuple and as an array. Compared by identity: the slot cache
    holds one object per row, so within one feedback two items share a row exactly when they
    share the object (and the object hashes without reading its ids)."""

    __slots__ = ("ids", "array", "raw")

    def __init__(self, ids: tuple[int, ...]) -> None:
        self.ids = ids
        self.array = np.array(ids, dtype=np.int64)
        self.raw = self.array.tobytes()  # what the C kernel reads


class _Namespace:
    """One namespace's links (sorted feature ids), used documents and co-use edges."""

    __slots__ = ("name", "fids", "pos", "neg", "docs", "edges", "edge_count")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fids = np.empty(0, dtype=np.int64)
        self.pos = np.empty(0)
        self.neg = np.empty(0)
        self.docs: dict[str, tuple[float, float]] = {}
        self.edges: edges.Adjacency = {}  # each edge's list shared by its two documents
        self.edge_count = 0

    def gather(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not len(self.fids):
            zero = np.zeros(len(idx))
            return zero, zero.copy()
        at = np.minimum(np.searchsorted(self.fids, idx), len(self.fids) - 1)
        hit = self.fids[at] == idx
        return np.where(hit, self.pos[at], 0.0), np.where(hit, self.neg[at], 0.0)


class MemoryState:
    """Learned state in this process only; gone when it exits.

    Args:
        max_impressions: How many impressions that received feedback to keep (oldest dropped
            first): they are what tuning and replay read.
        impression_ttl_s: Impressions that never received feedback expire after this long
            (wall clock), one day by default.
    """

    #: Its impressions live in this process (see :class:`~heaprank.state.capabilities.LocalImpressions`).
    impressions_in_process: Literal[True] = True

    def __init__(self, *, max_impressions: int = 100_000, impression_ttl_s: float = DAY_S) -> None:
        if isinstance(max_impressions, bool) or not isinstance(max_impressions, int) \
                or max_impressions < 1:
            raise ValueError("max_impressions: must be an int >= 1")
        if not (isinstance(impression_ttl_s, (int, float)) and impression_ttl_s > 0):
            raise ValueError("impression_ttl_s: must be > 0")
        self.max_impressions = max_impressions
        self.impression_ttl_s = float(impression_ttl_s)
        self._lock = threading.RLock()
        self._fid: dict[str, int] = {}
        self._fname: list[str | None] = []
        self._free: list[int] = []
        self._gpos = np.zeros(64)
        self._gneg = np.zeros(64)
        self._gns = np.zeros(64, dtype=np.int64)  # namespaces holding a link of the feature
        # A feedback's increments by feature id, zero outside a lean feedback: it sums the rows
        # into them in place, then zeroes the ids it touched (see _learn)
        self._dpos = np.zeros(64)
        self._dneg = np.zeros(64)
        self._ns: dict[str, _Namespace] = {}
        self._open: dict[str, tuple[_Namespace, bytes]] = {}  # no feedback yet, oldest first
        self._fed: dict[str, tuple[_Namespace, bytes]] = {}  # in order of first feedback
        self._explicit: dict[tuple[str, str], str] = {}  # (namespace, feedback id) -> recall id
        self._puts = 0
        self._feedbacks = 0
        self._rows: dict[tuple[str, ...], list[int]] = {}  # feature row -> its feature ids
        #: (question type, slots, doc id or None) -> the feature ids of the row they expand to
        self._slot_rows: dict[tuple[str, tuple[str, ...], str | None], _Row] = {}
        #: The same rows (without doc ids) by the identity of the slots tuple: a reranker
        #: hands the same tuple for a feature row every time, and hashing it reads each of its
        #: strings (cache misses right after a rerank). An entry holds its tuple, so the id is
        #: not reused while it lives; cleared with the rows.
        self._rows_by_slots: dict[int, tuple[tuple[str, ...], str, _Row, bytes]] = {}
        #: Bumped by every change of the link counts: a reader may keep what it derived from
        #: them while the version stands (Reranker does, per set of feature rows).
        self.version = 0
        # What the latest impressions showed, as written: feedback follows a rerank closely,
        # and reads them without decoding (bounded; dropped at feedback and when forgotten).
        self._shown: dict[str, _Shown] = {}

    def __repr__(self) -> str:
        return "MemoryState()"

    # ------------------------------------------------------------------ links

    def _index(self, features: Sequence[str]) -> np.ndarray:
        return np.fromiter(map(self._fid.get, features, itertools.repeat(-1)), dtype=np.int64,
                           count=len(features))

    def _counts(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        idx = self._index(features)
        known = idx >= 0
        gpos = np.where(known, self._gpos[idx], 0.0)
        gneg = np.where(known, self._gneg[idx], 0.0)
        ns = self._ns.get(namespace)
        if ns is None:
            pos, neg = np.zeros(len(idx)), np.zeros(len(idx))
        else:
            pos, neg = ns.gather(idx)
        return LinkCounts(pos, neg, gpos, gneg)

    def _docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        ns = self._ns.get(namespace)
        if ns is None or not ns.docs:
            return DocStats(np.full(len(ids), math.nan), np.zeros(len(ids)))
        if doc_kernel is not None and type(ids) is tuple:
            both = doc_kernel(ns.docs, ids)
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
            return self._counts(namespace, features)

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        with self._lock:
            return self._docs(namespace, ids)

    def read(self, namespace: str, features: Sequence[str],
             ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        with self._lock:
            return self._counts(namespace, features), self._docs(namespace, ids)

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, edges.EdgeRows]:
        with self._lock:
            ns = self._ns.get(namespace)
            among = edges.EdgeRows.empty() if ns is None or not ns.edges else \
                edges.among(ids, ns.edges.get)
            return self._counts(namespace, features), self._docs(namespace, ids), among

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        with self._lock:
            ns = self._ns.get(namespace)
            return [] if ns is None else sorted(
                (a, b, row[0], row[1], row[2]) for a, nbrs in ns.edges.items()
                for b, row in nbrs.items() if a < b)

    def _intern(self, features: Sequence[str]) -> np.ndarray:
        out = np.empty(len(features), dtype=np.int64)
        for j, f in enumerate(features):
            i = self._fid.get(f)
            if i is None:
                if self._free:
                    i = self._free.pop()
                    self._fname[i] = f
                else:
                    i = len(self._fname)
                    self._fname.append(f)
                    if i >= len(self._gpos):
                        grow = len(self._gpos)
                        self._gpos = np.concatenate([self._gpos, np.zeros(grow)])
                        self._gneg = np.concatenate([self._gneg, np.zeros(grow)])
                        self._gns = np.concatenate([self._gns, np.zeros(grow, dtype=np.int64)])
                        self._dpos = np.zeros(len(self._gpos))
                        self._dneg = np.zeros(len(self._gpos))
                self._fid[f] = i
            out[j] = i
        return out

    def _add(self, ns: _Namespace, idx: np.ndarray, dpos: np.ndarray, dneg: np.ndarray) -> None:
        """Add evidence to a namespace and the pool; ``idx`` holds distinct feature ids."""
        self.version += 1
        self._gpos[idx] += dpos
        self._gneg[idx] += dneg
        at = ns.fids.searchsorted(idx)
        if len(ns.fids) and (ns.fids.take(at, mode="clip") == idx).all():
            ns.pos[at] += dpos  # every link known to the namespace already: the usual case
            ns.neg[at] += dneg
            return
        clipped = np.minimum(at, max(len(ns.fids) - 1, 0))
        present = (at < len(ns.fids)) & (ns.fids[clipped] == idx) if len(ns.fids) else \
            np.zeros(len(idx), dtype=bool)
        ns.pos[clipped[present]] += dpos[present]
        ns.neg[clipped[present]] += dneg[present]
        new = ~present
        if new.any():
            self._gns[idx[new]] += 1
            fids = np.concatenate([ns.fids, idx[new]])
            order = np.argsort(fids, kind="stable")
            ns.fids = fids[order]
            ns.pos = np.concatenate([ns.pos, dpos[new]])[order]
            ns.neg = np.concatenate([ns.neg, dneg[new]])[order]

    # ------------------------------------------------------------- impressions

    def _namespace(self, name: str) -> _Namespace:
        ns = self._ns.get(name)
        if ns is None:
            ns = self._ns[name] = _Namespace(name)
        return ns

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
            self._open[rid] = (self._namespace(impression.namespace), body)
            self._shown[rid] = shown
            if len(self._shown) > _SHOWN_CACHE:
                del self._shown[next(iter(self._shown))]
            if feedback_id is not None:
                self._explicit[(impression.namespace, feedback_id)] = rid
            self._puts += 1
            if self._puts % _PRUNE_EVERY == 1:
                self._prune()
            return rid

    def _prune(self) -> None:
        cutoff = time.time() - self.impression_ttl_s
        while self._open:
            rid = next(iter(self._open))
            if recall_born_s(rid) >= cutoff:
                break
            del self._open[rid]
            self._shown.pop(rid, None)
        while len(self._fed) > self.max_impressions:
            del self._fed[next(iter(self._fed))]
        if len(self._explicit) > 2 * (len(self._open) + len(self._fed)) + 64:
            self._explicit = {k: r for k, r in self._explicit.items()
                              if r in self._open or r in self._fed}

    def prune(self) -> None:
        """Expire impressions now (normally done every few hundred writes)."""
        with self._lock:
            self._prune()

    def _entry(self, recall_id: str) -> tuple[_Namespace, bytes] | None:
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

    def _row_ids(self, features: tuple[str, ...]) -> list[int]:
        """The feature ids of a feature row, interned on first sight and cached per row
        (feedback sees the same few rows over and over)."""
        ids = self._rows.get(features)
        if ids is None:
            if len(self._rows) >= _ROW_CACHE:
                self._rows.clear()
            ids = self._rows[features] = self._intern(features).tolist()
        return ids

    def _posterior_mean(self, ns: _Namespace, ids: Sequence[int] | np.ndarray,
                        learning: linkmath.Learning) -> np.ndarray:
        idx = np.array(ids, dtype=np.int64)
        pos, neg = ns.gather(idx)
        alpha, beta = linkmath.posterior(LinkCounts(pos, neg, self._gpos[idx], self._gneg[idx]),
                                         learning)
        return linkmath.posterior_mean(alpha, beta)

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
                    return self._posterior_mean(ns, ids, batch)

                idx, dpos, dneg = linkmath.credit_ids(todo, self._row_ids, p_of, em=batch.em)
                self._add(ns, idx, dpos, dneg)
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
                self._feedbacks += 1
        return FeedbackOutcome(batch.recall_id, tuple(i.id for i in todo), tuple(done))

    def _slot_row(self, key: tuple[str, tuple[str, ...], str | None]) -> _Row:
        """The row that an impression's ``(question type, slots, doc id or None)`` expand to
        (its ids from :meth:`_row_ids`), cached on the slots themselves: the lean feedback never
        builds the feature strings of a row it has seen. Never clears the cache (its caller
        does, before its rows: see :class:`_Row`)."""
        row = self._slot_rows[key] = _Row(tuple(self._row_ids(expand_features(*key))))
        return row

    def _learn(self, ns: _Namespace, rejected: dict[_Row, float],
               used_rows: list[tuple[_Row, np.ndarray | None]], em: bool,
               learning: linkmath.Learning) -> None:
        """Add one feedback's credit to ``ns`` and the pool: the numbers of
        :func:`heaprank.learning.links.credit_rows`, bit for bit, with one array add per row.

        ``rejected``: each distinct ignored row with its summed reject weight, in the order the
        rows first appear; ``used_rows``: each used row with the link means the rerank read of
        it (``None``: read them now). Each feature's increments are added in the order
        ``credit_rows`` adds them (ignored rows in order, then the used rows in order) into the
        zeroed scratch arrays, which are zeroed again at the ids touched, whatever happens.
        Per row, not per feature: numpy's few row adds beat a dict update per feature, most of
        all right after a rerank has pushed this code out of the CPU caches (measured). With
        the C kernels and every link known to the namespace (the usual case), the same sums
        in one C pass (``_kernels.learn_known``).
        """
        # each used row's link means (None: uniform credit), read now where not kept
        means_of = [None if not em else means if means is not None and len(means) == len(
            row.ids) else self._posterior_mean(ns, row.array, learning)
            for row, means in used_rows]
        if learn_kernel is not None and learn_kernel(
                [*[row.raw for row in rejected], *[row.raw for row, _ in used_rows]],
                list(rejected.values()), means_of, ns.fids, ns.pos, ns.neg, self._gpos,
                self._gneg):
            self.version += 1  # every link known to the namespace: applied in one C pass
            return
        credit = []  # each used row's shares, as credit_rows makes them (floats)
        for (row, _), means in zip(used_rows, means_of):
            shares: list[float] | None = None
            if means is not None:
                ps = means.tolist()
                u = linkmath.used_total(ps)
                if u > 0.0:  # min(1, p / U)
                    shares = list(map(min, itertools.repeat(1.0),
                                      map(operator.truediv, ps, itertools.repeat(u))))
            credit.append(shares if shares is not None else [1.0 / len(row.ids)] * len(row.ids))
        shares_of = [np.array(shares) for shares in credit]
        # The feature ids of every row, repeats included: read from each row's array (a
        # set of the ids' int objects costs more, scattered in memory as they are)
        parts = [*[row.array for row in rejected], *[row.array for row, _ in used_rows]]
        idx = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        dpos, dneg = self._dpos, self._dneg
        one_used = len(used_rows) == 1
        try:
            for row, weight in rejected.items():  # a row's features are distinct: one add each
                dneg[row.array] += weight
            for (row, _), row_shares in zip(used_rows, shares_of):
                if not one_used:
                    dpos[row.array] += row_shares
                dneg[row.array] += 1.0 - row_shares
            fids = ns.fids
            at = fids.searchsorted(idx)
            if len(fids) and (fids.take(at, mode="clip") == idx).all():
                # Every link known to the namespace already (the usual case). A repeated id
                # reads the same old count and writes the same sum each time: added once.
                add_neg = dneg[idx]
                self.version += 1
                self._gneg[idx] += add_neg
                ns.neg[at] += add_neg
                if one_used:  # its shares are the only pos increments, each feature's 0.0 + r
                    row = used_rows[0][0]
                    self._gpos[row.array] += shares_of[0]
                    ns.pos[at[len(idx) - len(row.ids):]] += shares_of[0]  # its rows come last
                elif used_rows:  # (none used: every pos increment is 0.0, adding nothing)
                    add_pos = dpos[idx]
                    self._gpos[idx] += add_pos
                    ns.pos[at] += add_pos
            else:
                if one_used:
                    dpos[used_rows[0][0].array] += shares_of[0]
                distinct = np.unique(idx)
                self._add(ns, distinct, dpos[distinct], dneg[distinct])
        finally:
            dpos[idx] = 0.0
            dneg[idx] = 0.0

    def apply_used(self, request: UsedFeedback) -> FeedbackOutcome | None:
        """``feedback(recall_id, used)`` on a recall that has had no feedback yet, straight
        from the impression as written: the same counts, bit for bit, as :meth:`apply_feedback`
        with the reranker's batch, without building the batch (see :class:`UsedFeedback`).
        Returns ``None`` where the general path must run (the recall is not a fresh one of
        this namespace, an id was not shown): that path then applies it or raises the error,
        so both paths keep one set of checks and messages.
        """
        recall_id, namespace, used, when = (request.recall_id, request.namespace, request.used,
                                            request.time)
        learning, em, read = request, request.em, request.read
        reject_weights, reject_weight = request.reject_weights, request.reject_weight
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
            if when is None:
                when = t if explicit else time.time()
            used_at = set(used)
            kept = read[1:] if read is not None and read[0] == self.version else None
            if len(self._slot_rows) > _ROW_CACHE - len(ids) or \
                    len(self._rows_by_slots) > _ROW_CACHE - len(ids):
                self._slot_rows.clear()  # before the rows, never among them (see _Row)
                self._rows_by_slots.clear()
            verdicts: Sequence[int] | None = self._learn_known_rows(
                ns, ids, slots, qtype, used_at, kept, em, learning, reject_weights) \
                if rows_kernel is not None and not doc_features else None
            if verdicts is None:
                verdicts = self._learn_shown(ns, ids, slots, qtype, doc_features, used_at, kept, em,
                                             learning, reject_weights, reject_weight)
            docs = ns.docs
            for d in ids:  # in shown order, as the general path records them
                if d in used_at:
                    last, uses = docs.get(d, (math.nan, 0.0))
                    docs[d] = (merge_last_used(last, when), uses + 1.0)
            del self._open[recall_id]
            del self._shown[recall_id]
            self._fed[recall_id] = (ns, codec.with_verdicts(body, verdicts))
            self._feedbacks += 1
        return FeedbackOutcome(recall_id, ids, ())

    def _learn_known_rows(self, ns: _Namespace, ids: tuple[str, ...],
                          slots: tuple[tuple[str, ...], ...], qtype: str, used_at: set[str],
                          kept: tuple[np.ndarray, Sequence[int]] | None, em: bool,
                          learning: linkmath.Learning, reject_weights: Sequence[float]
                          ) -> bytes | None:
        """:meth:`_learn_shown` in two C passes (``_kernels.shown_rows`` then
        ``learn_known``) when every shown row is known by its slots and every link by the
        namespace (the usual case): the verdicts, or None with nothing changed."""
        assert rows_kernel is not None and learn_kernel is not None
        got = rows_kernel(ids, slots, used_at, self._rows_by_slots, qtype, reject_weights)
        if got is None:
            return None
        raws, weights, used_rows, positions, verdicts = got
        # The means as _learn picks them (kept where they fit the row, else read now), written
        # out here: a shared helper cost this hot path a few percent (measured side by side).
        if not em:
            means_of: list[np.ndarray | None] = [None] * len(used_rows)
        else:
            means_of = []
            for row, at in zip(used_rows, positions):
                means = kept[0][kept[1][at]] if kept is not None and at < len(kept[1]) else None
                means_of.append(means if means is not None and len(means) == len(row.ids)
                                else self._posterior_mean(ns, row.array, learning))
        if not learn_kernel(raws, weights, means_of, ns.fids, ns.pos, ns.neg, self._gpos,
                            self._gneg):
            return None  # a link new to the namespace: the Python pass adds it
        self.version += 1
        return verdicts

    def _learn_shown(self, ns: _Namespace, ids: tuple[str, ...],
                     slots: tuple[tuple[str, ...], ...], qtype: str, doc_features: bool,
                     used_at: set[str], kept: tuple[np.ndarray, Sequence[int]] | None, em: bool,
                     learning: linkmath.Learning, reject_weights: Sequence[float],
                     reject_weight: Callable[[int], float]) -> list[int]:
        """A fresh feedback's credit from the shown items' rows (found by their slots, cached
        on first sight), added by :meth:`_learn`: the verdicts."""
        cached, n_weights = self._slot_rows.get, len(reject_weights)
        by_slots = self._rows_by_slots
        rejected: dict[_Row, float] = {}
        used_rows: list[tuple[_Row, np.ndarray | None]] = []
        verdicts = [codec.IGNORED] * len(ids)
        for rank, (d, row_slots) in enumerate(zip(ids, slots), start=1):
            seen = None if doc_features else by_slots.get(id(row_slots))
            if seen is not None and seen[0] is row_slots and seen[1] == qtype:
                row = seen[2]
            else:
                key = (qtype, row_slots, d if doc_features else None)
                row = cached(key) or self._slot_row(key)
                if not doc_features:
                    by_slots[id(row_slots)] = (row_slots, qtype, row, row.raw)
            if d in used_at:
                verdicts[rank - 1] = codec.USED
                used_rows.append((row, kept[0][kept[1][rank - 1]]
                                  if kept is not None and rank <= len(kept[1]) else None))
            else:  # the same row again: its weights summed first, as the batch sums them
                weight = reject_weights[rank] if rank < n_weights else reject_weight(rank)
                rejected[row] = rejected.get(row, 0.0) + weight
        self._learn(ns, rejected, used_rows, em, learning)
        return verdicts

    # ------------------------------------------------------------------ audit

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        with self._lock:
            if namespace is None:
                live = [(name, i) for i, name in enumerate(self._fname)
                        if name is not None and self._gns[i] > 0]
                live.sort()
                idx = np.array([i for _, i in live], dtype=np.int64)
                return [n for n, _ in live], self._gpos[idx].copy(), self._gneg[idx].copy()
            ns = self._ns.get(namespace)
            if ns is None or not len(ns.fids):
                return [], np.empty(0), np.empty(0)
            names = [str(self._fname[i]) for i in ns.fids.tolist()]
            order = np.argsort(np.array(names, dtype=object), kind="stable")
            return [names[j] for j in order.tolist()], ns.pos[order], ns.neg[order]

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(n for n, ns in self._ns.items() if len(ns.fids) or ns.docs)

    def forget_namespace(self, namespace: str, *, scrub_global: bool = True) -> None:
        with self._lock:
            self.version += 1
            self._rows.clear()  # its feature names, and ids that are about to be reused
            self._slot_rows.clear()  # its slots and doc ids, and those ids
            self._rows_by_slots.clear()
            ns = self._ns.pop(namespace, None)
            if ns is not None:
                idx = ns.fids
                if scrub_global:
                    self._gpos[idx] = np.maximum(self._gpos[idx] - ns.pos, 0.0)
                    self._gneg[idx] = np.maximum(self._gneg[idx] - ns.neg, 0.0)
                self._gns[idx] -= 1
                for i in idx[self._gns[idx] <= 0].tolist():
                    del self._fid[self._fname[i]]  # type: ignore[arg-type]
                    self._fname[i] = None
                    self._gpos[i] = self._gneg[i] = 0.0
                    self._gns[i] = 0
                    self._free.append(i)
            for table in (self._open, self._fed):
                for rid in [r for r, (owner, _) in table.items() if owner.name == namespace]:
                    del table[rid]
                    self._shown.pop(rid, None)
            self._explicit = {k: r for k, r in self._explicit.items() if k[0] != namespace}

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "namespaces": len(self.namespaces()),
                "links": sum(len(ns.fids) for ns in self._ns.values()),
                "global_links": int((self._gns > 0).sum()),
                "documents": sum(len(ns.docs) for ns in self._ns.values()),
                "impressions": len(self._open) + len(self._fed),
                "feedbacks": self._feedbacks,
            }

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
            ns = self._ns.get(namespace)
            return [] if ns is None else [(i, last, uses) for i, (last, uses) in ns.docs.items()]

    def iter_impressions(self) -> list[tuple[str, str, bytes]]:
        """``(recall_id, namespace, codec bytes)`` of every live impression."""
        with self._lock:
            return [(rid, ns.name, body) for table in (self._open, self._fed)
                    for rid, (ns, body) in table.items()]
