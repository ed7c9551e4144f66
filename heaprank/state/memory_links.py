"""The memory backend's link counts: feature names interned once as ids, the pooled counts in
global arrays indexed by id, and per namespace its sorted feature ids with two float arrays.

The counts alone (what reads them, what adds to them, what forgetting takes away); the
memory backend (:mod:`heaprank.state.memory`) holds them under its lock.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..model.co_use import Adjacency
from ..model.evidence import LinkCounts
from .base import OWN_PREFIX


class Namespace:
    """One namespace's links (sorted feature ids), used documents and co-use edges."""

    __slots__ = ("name", "fids", "pos", "neg", "docs", "edges", "edge_count", "edge_version")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fids = np.empty(0, dtype=np.int64)
        self.pos = np.empty(0)
        self.neg = np.empty(0)
        self.docs: dict[str, tuple[float, float]] = {}
        self.edges: Adjacency = {}  # each edge's list shared by its two documents
        self.edge_count = 0
        self.edge_version = 0  # bumped by every change of the edges

    def gather(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not len(self.fids):
            zero = np.zeros(len(idx))
            return zero, zero.copy()
        at = np.minimum(np.searchsorted(self.fids, idx), len(self.fids) - 1)
        hit = self.fids[at] == idx
        return np.where(hit, self.pos[at], 0.0), np.where(hit, self.neg[at], 0.0)


class LinkTable:
    """The interned features, the pooled counts and every namespace's links."""

    def __init__(self) -> None:
        self.fid: dict[str, int] = {}
        self.fname: list[str | None] = []
        self.free: list[int] = []
        self.gpos = np.zeros(64)
        self.gneg = np.zeros(64)
        self.gns = np.zeros(64, dtype=np.int64)  # namespaces holding a link of the feature
        #: Features kept per namespace only (``doc:`` names, a caller's document ids): their
        #: pooled counts stay zero, and the pooled listing leaves them out.
        self.own = np.zeros(64, dtype=bool)
        self.owned = False  # whether any feature was ever kept per namespace only
        self.ns: dict[str, Namespace] = {}
        #: Bumped by every change of the counts: a reader may keep what it derived from them
        #: while the version stands.
        self.version = 0

    def namespace(self, name: str) -> Namespace:
        """The namespace ``name``, made on first use."""
        ns = self.ns.get(name)
        if ns is None:
            ns = self.ns[name] = Namespace(name)
        return ns

    def index(self, features: Sequence[str]) -> np.ndarray:
        """The ids of ``features`` (-1 for a feature never interned)."""
        return np.fromiter(map(self.fid.get, features, itertools.repeat(-1)), dtype=np.int64,
                           count=len(features))

    def counts(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        idx = self.index(features)
        known = idx >= 0
        gpos = np.where(known, self.gpos[idx], 0.0)
        gneg = np.where(known, self.gneg[idx], 0.0)
        holders = np.where(known, self.gns[idx], 0).astype(np.float64)
        ns = self.ns.get(namespace)
        if ns is None:
            pos, neg = np.zeros(len(idx)), np.zeros(len(idx))
        else:
            pos, neg = ns.gather(idx)
        return LinkCounts(pos, neg, gpos, gneg, holders)

    def intern(self, features: Sequence[str]) -> np.ndarray:
        """The ids of ``features``, interning the new ones (a freed id is reused first)."""
        known = list(map(self.fid.get, features))
        if None not in known:  # the usual case: every feature seen before
            return np.array(known, dtype=np.int64)
        out = np.empty(len(features), dtype=np.int64)
        for j, f in enumerate(features):
            i = self.fid.get(f)
            if i is None:
                if self.free:
                    i = self.free.pop()
                    self.fname[i] = f
                else:
                    i = len(self.fname)
                    self.fname.append(f)
                    if i >= len(self.gpos):
                        self._grow()
                self.fid[f] = i
                self.own[i] = f.startswith(OWN_PREFIX)
                self.owned = self.owned or bool(self.own[i])
            out[j] = i
        return out

    def _grow(self) -> None:
        grow = len(self.gpos)
        self.gpos = np.concatenate([self.gpos, np.zeros(grow)])
        self.gneg = np.concatenate([self.gneg, np.zeros(grow)])
        self.gns = np.concatenate([self.gns, np.zeros(grow, dtype=np.int64)])
        self.own = np.concatenate([self.own, np.zeros(grow, dtype=bool)])

    def add(self, ns: Namespace, idx: np.ndarray, dpos: np.ndarray, dneg: np.ndarray) -> None:
        """Add evidence to a namespace and the pool; ``idx`` holds distinct feature ids."""
        self.version += 1
        self.gpos[idx] += dpos
        self.gneg[idx] += dneg
        if self.owned:
            self.unpool(idx)
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
            self.gns[idx[new]] += 1
            fids = np.concatenate([ns.fids, idx[new]])
            order = np.argsort(fids, kind="stable")
            ns.fids = fids[order]
            ns.pos = np.concatenate([ns.pos, dpos[new]])[order]
            ns.neg = np.concatenate([ns.neg, dneg[new]])[order]

    def unpool(self, idx: np.ndarray) -> None:
        """Zero the pooled counts of the features of ``idx`` kept per namespace only (-1: none),
        right after a write added to them (within the same call, under the state's lock)."""
        idx = idx[idx >= 0]
        own = idx[self.own[idx]]
        if len(own):
            self.gpos[own] = 0.0
            self.gneg[own] = 0.0

    def list_links(self, namespace: str | None) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Every link of ``namespace`` (None: the pool) by feature name, sorted."""
        if namespace is None:
            live = [(name, i) for i, name in enumerate(self.fname)
                    if name is not None and self.gns[i] > 0 and not self.own[i]]
            live.sort()
            idx = np.array([i for _, i in live], dtype=np.int64)
            return [n for n, _ in live], self.gpos[idx].copy(), self.gneg[idx].copy()
        ns = self.ns.get(namespace)
        if ns is None or not len(ns.fids):
            return [], np.empty(0), np.empty(0)
        names = [str(self.fname[i]) for i in ns.fids.tolist()]
        order = np.argsort(np.array(names, dtype=object), kind="stable")
        return [names[j] for j in order.tolist()], ns.pos[order], ns.neg[order]

    def forget(self, namespace: str, *, scrub_global: bool) -> None:
        """Drop a namespace's links (their counts taken out of the pool when ``scrub_global``),
        and free the ids no namespace links any more."""
        self.version += 1
        ns = self.ns.pop(namespace, None)
        if ns is None:
            return
        idx = ns.fids
        if scrub_global:
            self.gpos[idx] = np.maximum(self.gpos[idx] - ns.pos, 0.0)
            self.gneg[idx] = np.maximum(self.gneg[idx] - ns.neg, 0.0)
        self.gns[idx] -= 1
        for i in idx[self.gns[idx] <= 0].tolist():
            del self.fid[self.fname[i]]  # type: ignore[arg-type]
            self.fname[i] = None
            self.gpos[i] = self.gneg[i] = 0.0
            self.gns[i] = 0
            self.free.append(i)
