"""The memory backend's feedback arithmetic on feature ids: the rows an impression's slots
expand to (interned once, cached on the slots), and one feedback's credit added to the counts
(:class:`~heaprank.state.memory_links.LinkTable`), the numbers of
:func:`heaprank.learning.links.credit_rows` bit for bit.

A fresh feedback (:meth:`LeanLearner.credit`) runs in two C passes when the feedback stage's
kernels are built (``heaprank._accel._feedback``: ``shown_rows`` finds the shown rows by their
slots, ``learn_known`` adds their credit), else in the Python passes below, its twins.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .._accel import kernels
from ..learning import links as linkmath
from ..records import IGNORED, USED, UsedFeedback
from ..scoring.features import expand_features
from .memory_links import LinkTable, Namespace

_KERNELS = kernels("feedback")
#: The C kernel of a lean feedback's sums (None: numpy)
learn_kernel = None if _KERNELS is None else _KERNELS.learn_known
#: The C kernel of the loop over the shown items (None: that loop in Python)
rows_kernel = None if _KERNELS is None else _KERNELS.shown_rows
ROW_CACHE = 65_536  # feature rows whose ids are cached (a few MB at most)

#: The rows a kept read of the rerank gives means for: (means, row of each shown item)
Kept = tuple[np.ndarray, Sequence[int]]


class Row:
    """A feature row's ids, as a tuple and as an array. Compared by identity: the slot cache
    holds one object per row, so within one feedback two items share a row exactly when they
    share the object (and the object hashes without reading its ids)."""

    __slots__ = ("ids", "array", "raw")

    def __init__(self, ids: tuple[int, ...]) -> None:
        self.ids = ids
        self.array = np.array(ids, dtype=np.int64)
        self.raw = self.array.tobytes()  # what the C kernel reads


class Fresh(NamedTuple):
    """A feedback on a fresh recall, as :meth:`MemoryState.apply_used` resolved it: the
    namespace, what the impression showed, the used ids, the means the rerank read (while the
    counts' version stands) and the request (its learning settings and reject weights). A named
    tuple: one is made per feedback, at a fifth of a frozen dataclass's cost."""

    ns: Namespace
    ids: tuple[str, ...]
    slots: tuple[tuple[str, ...], ...]
    qtype: str
    doc_features: bool
    used_at: set[str]
    kept: Kept | None
    request: UsedFeedback


class LeanLearner:
    """Feature rows by their slots, and one feedback's credit added to ``links``."""

    def __init__(self, links: LinkTable) -> None:
        self.links = links
        self.rows: dict[tuple[str, ...], list[int]] = {}  # feature row -> its feature ids
        #: (question type, slots, doc id or None) -> the feature ids of the row they expand to
        self.slot_rows: dict[tuple[str, tuple[str, ...], str | None], Row] = {}
        #: The same rows (without doc ids) by the identity of the slots tuple: a reranker
        #: hands the same tuple for a feature row every time, and hashing it reads each of its
        #: strings (cache misses right after a rerank). An entry holds its tuple, so the id is
        #: not reused while it lives (the kernel checks the tuple is the one it looked up);
        #: cleared with the rows.
        self.rows_by_slots: dict[int, tuple[tuple[str, ...], str, Row, bytes]] = {}

    def clear(self) -> None:
        """Forget every cached row (their ids are about to be reused)."""
        self.rows.clear()
        self.slot_rows.clear()
        self.rows_by_slots.clear()

    def make_room(self, n: int) -> None:
        """Clear the slot caches if ``n`` more rows might not fit, before any row is taken
        from them (never among them: see :class:`Row`)."""
        if len(self.slot_rows) > ROW_CACHE - n or len(self.rows_by_slots) > ROW_CACHE - n:
            self.slot_rows.clear()
            self.rows_by_slots.clear()

    def row_ids(self, features: tuple[str, ...]) -> list[int]:
        """The feature ids of a feature row, interned on first sight and cached per row
        (feedback sees the same few rows over and over)."""
        ids = self.rows.get(features)
        if ids is None:
            if len(self.rows) >= ROW_CACHE:
                self.rows.clear()
            ids = self.rows[features] = self.links.intern(features).tolist()
        return ids

    def slot_row(self, key: tuple[str, tuple[str, ...], str | None]) -> Row:
        """The row that an impression's ``(question type, slots, doc id or None)`` expand to,
        cached on the slots themselves: the lean feedback never builds the feature strings of
        a row it has seen. Never clears the cache (:meth:`make_room` does, before)."""
        row = self.slot_rows[key] = Row(tuple(self.row_ids(expand_features(*key))))
        return row

    def credit(self, fresh: Fresh) -> Sequence[int]:
        """A fresh feedback's credit added to its namespace and the pool: the verdicts."""
        if rows_kernel is not None and learn_kernel is not None and not fresh.doc_features:
            verdicts = self.credit_known_rows(fresh)
            if verdicts is not None:
                return verdicts
        shown = self.credit_shown(fresh)
        if fresh.doc_features:  # the document features stay the namespace's: pooled at zero
            self.links.unpool(self.links.index([f"doc:{d}" for d in fresh.ids]))
        return shown

    def credit_known_rows(self, fresh: Fresh) -> bytes | None:
        """:meth:`credit_shown` in two C passes (``_feedback.shown_rows`` then
        ``learn_known``) when every shown row is known by its slots and every link by the
        namespace (the usual case): the verdicts, or None with nothing changed."""
        assert rows_kernel is not None and learn_kernel is not None
        request = fresh.request
        got = rows_kernel(fresh.ids, fresh.slots, fresh.used_at, self.rows_by_slots,
                          fresh.qtype, request.reject_weights)
        if got is None:
            return None
        raws, weights, used_rows, positions, verdicts = got
        # The means as learn picks them (kept where they fit the row, else read now), written
        # out here: a shared helper cost this hot path a few percent (measured side by side).
        kept, ns = fresh.kept, fresh.ns
        if not request.em:
            means_of: list[np.ndarray | None] = [None] * len(used_rows)
        else:
            means_of = []
            for row, at in zip(used_rows, positions):
                means = kept[0][kept[1][at]] if kept is not None and at < len(kept[1]) else None
                means_of.append(means if means is not None and len(means) == len(row.ids)
                                else self.links.posterior_mean(ns, row.array, request))
        links = self.links
        if not learn_kernel(raws, weights, means_of, ns.fids, ns.pos, ns.neg, links.gpos,
                            links.gneg):
            return None  # a link new to the namespace: the Python pass adds it
        links.version += 1
        return verdicts

    def credit_shown(self, fresh: Fresh) -> list[int]:
        """A fresh feedback's credit from the shown items' rows (found by their slots, cached
        on first sight), added by :meth:`learn`: the verdicts."""
        request, kept, doc_features = fresh.request, fresh.kept, fresh.doc_features
        cached, by_slots = self.slot_rows.get, self.rows_by_slots
        weights, n_weights = request.reject_weights, len(request.reject_weights)
        rejected: dict[Row, float] = {}
        used_rows: list[tuple[Row, np.ndarray | None]] = []
        verdicts = [IGNORED] * len(fresh.ids)
        for rank, (d, row_slots) in enumerate(zip(fresh.ids, fresh.slots), start=1):
            seen = None if doc_features else by_slots.get(id(row_slots))
            if seen is not None and seen[0] is row_slots and seen[1] == fresh.qtype:
                row = seen[2]
            else:
                key = (fresh.qtype, row_slots, d if doc_features else None)
                row = cached(key) or self.slot_row(key)
                if not doc_features:
                    by_slots[id(row_slots)] = (row_slots, fresh.qtype, row, row.raw)
            if d in fresh.used_at:
                verdicts[rank - 1] = USED
                used_rows.append((row, kept[0][kept[1][rank - 1]]
                                  if kept is not None and rank <= len(kept[1]) else None))
            else:  # the same row again: its weights summed first, as the batch sums them
                weight = weights[rank] if rank < n_weights else request.reject_weight(rank)
                rejected[row] = rejected.get(row, 0.0) + weight
        self.learn(fresh.ns, rejected, used_rows, request.em, request)
        return verdicts

    def learn(self, ns: Namespace, rejected: dict[Row, float],
              used_rows: list[tuple[Row, np.ndarray | None]], em: bool,
              learning: linkmath.Learning) -> None:
        """Add one feedback's credit to ``ns`` and the pool: the numbers of
        :func:`heaprank.learning.links.credit_rows`, bit for bit.

        ``rejected``: each distinct ignored row with its summed reject weight, in the order the
        rows first appear; ``used_rows``: each used row with the link means the rerank read of
        it (``None``: read them now). With the C kernels and every link known to the namespace
        (the usual case), the sums in one C pass (``_feedback.learn_known``); else
        :meth:`_add_rows`.
        """
        # each used row's link means (None: uniform credit), read now where not kept
        means_of = [None if not em else means if means is not None and len(means) == len(
            row.ids) else self.links.posterior_mean(ns, row.array, learning)
            for row, means in used_rows]
        links = self.links
        if learn_kernel is not None and learn_kernel(
                (*[row.raw for row in rejected], *[row.raw for row, _ in used_rows]),
                list(rejected.values()), means_of, ns.fids, ns.pos, ns.neg, links.gpos,
                links.gneg):
            links.version += 1  # every link known to the namespace: applied in one C pass
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
        self._add_rows(ns, rejected, [row for row, _ in used_rows],
                       [np.array(shares) for shares in credit])

    def _add_rows(self, ns: Namespace, rejected: dict[Row, float], used: list[Row],
                  shares_of: list[np.ndarray]) -> None:
        """The credit of :meth:`learn` added with one array add per row, through the zeroed
        scratch arrays, which are zeroed again at the ids touched, whatever happens. Per row,
        not per feature: numpy's few row adds beat a dict update per feature, most of all right
        after a rerank has pushed this code out of the CPU caches (measured)."""
        links = self.links
        # The feature ids of every row, repeats included: read from each row's array (a
        # set of the ids' int objects costs more, scattered in memory as they are)
        parts = [*[row.array for row in rejected], *[row.array for row in used]]
        idx = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        dpos, dneg = links.dpos, links.dneg
        one_used = len(used) == 1
        try:
            for row, weight in rejected.items():  # a row's features are distinct: one add each
                dneg[row.array] += weight
            for row, row_shares in zip(used, shares_of):
                if not one_used:
                    dpos[row.array] += row_shares
                dneg[row.array] += 1.0 - row_shares
            fids = ns.fids
            at = fids.searchsorted(idx)
            if len(fids) and (fids.take(at, mode="clip") == idx).all():
                # Every link known to the namespace already (the usual case). A repeated id
                # reads the same old count and writes the same sum each time: added once.
                add_neg = dneg[idx]
                links.version += 1
                links.gneg[idx] += add_neg
                ns.neg[at] += add_neg
                if one_used:  # its shares are the only pos increments, each feature's 0.0 + r
                    links.gpos[used[0].array] += shares_of[0]
                    ns.pos[at[len(idx) - len(used[0].ids):]] += shares_of[0]  # its rows last
                elif used:  # (none used: every pos increment is 0.0, adding nothing)
                    add_pos = dpos[idx]
                    links.gpos[idx] += add_pos
                    ns.pos[at] += add_pos
            else:
                if one_used:
                    dpos[used[0].array] += shares_of[0]
                distinct = np.unique(idx)
                links.add(ns, distinct, dpos[distinct], dneg[distinct])
        finally:
            dpos[idx] = 0.0
            dneg[idx] = 0.0
