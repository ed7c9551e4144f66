"""Feedback: which shown items an answer used, resolved against the impression of their recall
into one :class:`~heaprank.records.Update` each.

A feedback goes through three plain steps, which :class:`~heaprank.Reranker` calls in order with
the state's reads and its write between them:

1. :meth:`FeedbackStage.ask` checks the caller's arguments (an :class:`Asked`);
2. :meth:`FeedbackStage.plan` resolves them against the recall's impression: each shown item's
   verdict, its features and reject weight, and the items already recorded (a :class:`Plan`);
3. :meth:`FeedbackStage.updates` works the updates out: the verdicts to record and the count
   increments they teach, by :func:`heaprank.model.links.increments`, the one place the
   learning rule is written. The state only applies them.

Several feedbacks at once (``feedback_many``) are a list of the same values: each update is
worked out from the counts as the ones before it in the list leave them, as if applied one
after the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._checks import MAX_K, check_id, check_ids, check_namespace, check_query
from .._time import DAY_S, FEEDBACK_EARLY_S, feedback_time_ok, resolve_now, to_epoch
from ..config import Config
from ..errors import FeedbackError, InputError, InputTypeError
from ..model import co_use as co_use_rule
from ..model import examination
from ..model import links as linkmath
from ..model.evidence import LinkCounts
from ..model.privacy import withheld
from ..records import (
    IGNORED,
    LABEL_OF,
    LABELS,
    OPEN,
    OUTDATED,
    USED,
    WRONG,
    EdgeChange,
    EdgeState,
    FeedbackOutcome,
    Impression,
    Update,
    new_outcome,
)
from ..scoring.candidates import CandidateLike, coerce_candidates
from ..scoring.scorer import Scorer
from ..state.base import OWN_PREFIX
from .impressions import KeptMeans

Used = Iterable[str]
Labels = Mapping[str, str]

#: The reject weight of an item labelled ``wrong``: three ignores, with no rank discount (who
#: labels an item has read it, wherever it was shown).
WRONG_WEIGHT = 3.0


def check_labels(labels: object) -> dict[str, int]:
    """``feedback(labels=...)`` checked: id -> verdict code (empty for None)."""
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise InputTypeError(f"labels: expected a mapping of id -> label, got "
                             f"{type(labels).__name__}")
    out: dict[str, int] = {}
    for d, name in labels.items():
        d = check_id(d, "labels")
        code = LABELS.get(name) if isinstance(name, str) else None
        if code is None:
            raise InputError(f"labels[{d!r}]: expected one of {', '.join(map(repr, LABELS))}, "
                             f"got {name!r}")
        out[d] = code
    return out


def used_ids(ids: object, field: str) -> tuple[str, ...]:
    """Checked ids from a list or tuple, or any other iterable of ids (read once). A bare
    string is refused: ``used="a"`` is far more often a mistake than a list of one."""
    if isinstance(ids, str):
        raise InputTypeError(f"{field}: expected a list of ids, got the str {ids[:40]!r}; "
                             f"write [{ids[:40]!r}] for one id")
    if not isinstance(ids, (list, tuple)) and isinstance(ids, Iterable) \
            and not isinstance(ids, (bytes, Mapping)):
        ids = tuple(ids)  # a set or a generator of ids
    return check_ids(ids, field)


def _span(seconds: float) -> str:
    """A time span as a person reads it: seconds, minutes, hours or days."""
    for unit, size in (("days", DAY_S), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def reject_weight(rank: int, discount: str) -> float:
    """The reject weight of an ignored item shown at ``rank`` (from 1): ``1 / log2(1 + rank)``
    with the log discount (and the fitted one, before its curve is fitted), else 1."""
    return 1.0 / math.log2(1.0 + rank) if discount in ("log", "fitted") else 1.0


#: The ranks whose reject weights a feedback stage keeps in a list (later ones are worked out).
KEPT_RANKS = 256


class Asked(NamedTuple):
    """One feedback call, checked: what it says of one recall's shown items.

    ``rest``: the shown items it does not name count as ignored (``feedback``); without it they
    stay open (``mark_used`` / ``mark_ignored``). ``time``: the feedback's own time, or None (the
    impression's clock when its caller chose it, else the wall clock)."""

    recall_id: str
    namespace: str | None
    used: tuple[str, ...]
    labels: Mapping[str, int]
    time: float | None
    rest: bool = True

    @property
    def named(self) -> tuple[str, ...]:
        """The ids the caller named."""
        return (*self.used, *self.labels)


class Item(NamedTuple):
    """A shown item a feedback records: its position, id, verdict code, and what it teaches."""

    rank: int
    id: str
    code: int
    judged: linkmath.Judged


class Plan(NamedTuple):
    """A feedback resolved against its recall's impression: the items still to record, in shown
    order, and the ids already recorded with the same verdict."""

    asked: Asked
    impression: Impression
    time: float
    todo: tuple[Item, ...]
    done: tuple[str, ...]

    def outcome(self) -> FeedbackOutcome:
        """What the call applied, as a caller sees it: without ``namespace=`` only the ids it
        named (the recall's other shown ids are its namespace's to know)."""
        applied = tuple(item.id for item in self.todo)
        done = self.done
        if self.asked.namespace is None:
            keep = set(self.asked.named).__contains__
            applied, done = tuple(filter(keep, applied)), tuple(filter(keep, done))
        return new_outcome(self.asked.recall_id, applied, done)


class FeedbackStage:
    """The feedback steps of one reranker. It reads the reranker's learning settings only
    (prior, credit, rejects, co-use), which are fixed for its life."""

    def __init__(self, config: Config, scorer: Scorer,
                 curve: Sequence[float] | None = None) -> None:
        self._config = config
        self._scorer = scorer
        self._space = scorer.space
        #: The reject weight of an ignored item by rank, for the usual ranks (index 0 unused)
        self._weights = [0.0] + [reject_weight(rank, config.learning.reject_discount)
                                 for rank in range(1, KEPT_RANKS + 1)]
        #: The fitted examination curve in force (``learning.reject_discount="fitted"``), else None
        self.curve: tuple[float, ...] | None = None
        self.examine(curve)

    def examine(self, curve: Sequence[float] | None) -> None:
        """With ``learning.reject_discount="fitted"``, weigh an ignored item by ``curve`` (the fitted
        examination probability of its rank relative to rank 1, from the re-fit's record;
        ranks past it extended by :func:`heaprank.model.examination.reject_curve`); None or
        another discount: no change."""
        if self._config.learning.reject_discount != "fitted" or not curve:
            return
        self.curve = tuple(curve)
        self._weights = [0.0] + examination.reject_curve(curve, KEPT_RANKS)

    def reject_weights(self, upto: int = 10) -> list[float]:
        """The reject weights in force for ranks 1..``upto``."""
        return [self._weight(rank) for rank in range(1, upto + 1)]

    def _weight(self, rank: int) -> float:
        weights = self._weights
        if rank < len(weights):
            return weights[rank]
        if self.curve is not None:
            return examination.reject_curve(self.curve, rank)[-1]
        return reject_weight(rank, self._config.learning.reject_discount)

    # ------------------------------------------------------------------ 1. ask

    @staticmethod
    def check(used: object, labels: object,
              field: str = "used") -> tuple[tuple[str, ...], dict[str, int]]:
        """``used`` (the argument ``field``) and ``labels`` checked, before anything is read or
        written: the used ids and the labels' verdict codes by id."""
        ids = used_ids(used, field)
        graded = check_labels(labels)
        listed = set(ids)
        for d, code in graded.items():
            if d in listed and code != USED:
                raise InputError(f"labels[{d!r}]: {LABEL_OF[code]!r}, but the id is also in "
                                 f"used=")
        return ids, graded

    @staticmethod
    def ask(recall_id: object, used: tuple[str, ...], labels: Mapping[str, int],
            namespace: object, now: Any, *, rest: bool = True) -> Asked:
        """A feedback call's arguments, checked (``used`` and ``labels`` by :meth:`check`)."""
        return Asked(check_id(recall_id, "recall_id"),
                     None if namespace is None else check_namespace(namespace), used, labels,
                     None if now is None else to_epoch(now, "now"), rest)

    def shown(self, namespace: object, query: object, shown: Sequence[CandidateLike],
              named: Sequence[str], n_used: int, now: Any, recall_id: str) -> Impression:
        """The impression an explicit feedback (``namespace=, query=, shown=``) is about: what
        a rerank would have recorded had it shown ``shown`` in that order. ``named``: the ids
        the feedback names (the first ``n_used`` in ``used=``), each checked to be shown."""
        namespace, query = check_namespace(namespace), check_query(query)
        when, explicit = resolve_now(now)
        cfg = self._config
        if isinstance(shown, Sequence) and len(shown) > MAX_K:  # (what an impression holds)
            raise InputError(f"shown: {len(shown)} items, at most {MAX_K} allowed")
        batch = coerce_candidates(shown, now=when, on_invalid=cfg.inputs.on_invalid,
                                  future_tolerance_s=cfg.inputs.future_tolerance_s)
        known = set(batch.ids)
        unknown = [d for d in named if d not in known]
        if unknown:  # checked before anything is written: no orphan impression
            field = "used" if unknown[0] in named[:n_used] else "labels:"
            raise FeedbackError(f"{field} id {unknown[0]!r} is not among the shown ids")
        seen = self._scorer.read(batch, query, cfg)
        slots_of = seen.generation.slots_of
        return Impression(recall_id=recall_id, namespace=namespace, qtype=seen.info.qtype,
                          time=when, time_explicit=explicit, ids=batch.ids,
                          slots=tuple(slots_of(r) for r in seen.rows[seen.row_of].tolist()),
                          doc_features=cfg.features.doc_features)

    # ----------------------------------------------------------------- 2. plan

    def plan(self, asked: Asked, imp: Impression | None) -> Plan:
        """Resolve ``asked`` against the impression of its recall (None: none found).

        Raises:
            FeedbackError: an unknown recall (or one of another namespace: the same words), an
                id that was not shown, a time outside the recall's window, or a verdict that
                contradicts one already recorded.
        """
        if imp is None or (asked.namespace is not None and imp.namespace != asked.namespace):
            raise FeedbackError(f"recall_id {asked.recall_id!r}: unknown (never recorded, "
                                f"expired or pruned)")
        position = dict(zip(imp.ids, range(1, len(imp.ids) + 1)))
        for field, ids in (("labels", asked.labels), ("used", asked.used)):
            unknown = next((d for d in ids if d not in position), None)
            if unknown is not None:
                what = "id" if field == "used" else "labels: id"
                raise FeedbackError(f"{what} {unknown!r} was not shown in recall "
                                    f"{imp.recall_id!r}")
        when = self._time(asked, imp)
        used, labels, rest, stored = set(asked.used), asked.labels, asked.rest, imp.verdicts
        todo: list[Item] = []
        done: list[str] = []
        for rank, d in enumerate(imp.ids, start=1):
            code = labels.get(d) or (USED if d in used else IGNORED if rest else OPEN)
            if code == OPEN:  # (mark_used / mark_ignored: an item not named stays open)
                continue
            before = stored[rank - 1] if rank <= len(stored) else OPEN
            if before == OPEN:
                todo.append(Item(rank, d, code, self._judged(imp, rank, code)))
            elif before == code:
                done.append(d)
            else:
                raise FeedbackError(f"recall {imp.recall_id}: id {d!r} was already recorded as "
                                    f"{LABEL_OF.get(before, before)}; feedback for an "
                                    f"impression cannot be changed")
        return Plan(asked, imp, when, tuple(todo), tuple(done))

    def _time(self, asked: Asked, imp: Impression) -> float:
        """The feedback's time: its own, else the impression's clock when the caller chose it
        (never mixed with the wall clock), else now."""
        when = asked.time
        if when is None:
            when = imp.time if imp.time_explicit else resolve_now(None)[0]
        if not feedback_time_ok(when, imp.time):
            gap = when - imp.time
            raise FeedbackError(f"now: {when:.0f} is {_span(abs(gap))} "
                                f"{'before' if gap < 0 else 'after'} its recall's rerank "
                                f"(feedback is accepted from {FEEDBACK_EARLY_S:.0f} s before it "
                                f"to 366 days after)")
        return when

    def _judged(self, imp: Impression, rank: int, code: int) -> linkmath.Judged:
        """What a shown item teaches: an ``outdated`` one nothing (its shape was right, its
        version old: the evidence is the tuning log's, for recency); a ``wrong`` one rejects its
        features with :data:`WRONG_WEIGHT`; an ignored one with its position's weight."""
        if code == OUTDATED:
            return linkmath.Judged((), False, 0.0)
        features = self._space.expand(imp.qtype, imp.slots[rank - 1],
                                      imp.ids[rank - 1] if imp.doc_features else None)
        if code == USED:
            return linkmath.Judged(features, True, 0.0)
        weight = WRONG_WEIGHT if code == WRONG else self._weight(rank)
        return linkmath.Judged(features, False, weight)

    # --------------------------------------------------------------- 3. update

    def wanted(self, plans: Sequence[Plan],
               kept: KeptMeans | None = None) -> dict[str, list[str]]:
        """The features whose posterior means the updates need, by namespace: those of every
        used item (EM credit; none without EM), but the first plan's items whose means are
        ``kept``."""
        out: dict[str, dict[str, None]] = {}
        if self._config.learning.em_credit:
            for i, plan in enumerate(plans):
                for item in plan.todo:
                    features = item.judged.features
                    if not item.judged.used or _kept(kept if i == 0 else None, item) is not None:
                        continue
                    out.setdefault(plan.impression.namespace, {}).update(
                        dict.fromkeys(features))
        return {ns: list(features) for ns, features in out.items()}

    def updates(self, plans: Sequence[Plan], counts: Mapping[str, tuple[list[str], LinkCounts]],
                kept: KeptMeans | None = None,
                edges: EdgeView | None = None) -> list[Update]:
        """The update of each plan, in order.

        ``counts``: by namespace, the features :meth:`wanted` named and their counts, read
        before; each plan's credit reads them as the plans before it leave them. ``kept``: the
        first plan's means by shown rank, as its rerank read them while the state's version has
        stood since (they are the same numbers as a read). ``edges``: with co-use, the one
        plan's namespace's edges around :meth:`edge_docs` (co-use feedback is worked out and
        applied one plan at a time).
        """
        book = _Counts(counts, self._config.learning.prior, self._config.learning.pooled_min_namespaces)
        out = []
        for i, plan in enumerate(plans):
            means = book.means(plan, kept if i == 0 else None)
            inc = linkmath.increments([item.judged for item in plan.todo], means,
                                      em=self._config.learning.em_credit)
            if i + 1 < len(plans):  # the next plans read the counts as this one leaves them
                book.add(plan.impression.namespace, inc)
            out.append(Update(
                recall_id=plan.impression.recall_id, namespace=plan.impression.namespace,
                time=plan.time, ranks=tuple(item.rank for item in plan.todo),
                codes=tuple(item.code for item in plan.todo),
                used=tuple(item.id for item in plan.todo if item.code == USED),
                features=inc.features, dpos=inc.dpos, dneg=inc.dneg,
                edges=self._edges(plan, edges)))
        return out

    # ----------------------------------------------------------------- co-use

    def pairs(self, plan: Plan) -> list[co_use_rule.Pair]:
        """The co-use pairs a plan forms (none without co-use): the edges its change reads are
        those of their documents."""
        settings = self._config.learning.co_use
        if settings is None:
            return []
        imp = plan.impression
        before = [r for r, code in enumerate(imp.verdicts, start=1) if code == USED]
        new = [item.rank for item in plan.todo if item.code == USED]
        return co_use_rule.co_use_pairs(imp.ids, before, new, settings.max_rank)

    def _edges(self, plan: Plan, edges: EdgeView | None) -> EdgeChange | None:
        """The plan's change of its namespace's co-use edges, by the one update rule
        (:func:`heaprank.model.co_use.update`)."""
        settings, pairs = self._config.learning.co_use, self.pairs(plan)
        if settings is None or not pairs or edges is None:
            return None
        adj = edges.state.adjacency
        count, written, deleted = co_use_rule.update(adj, edges.state.total, pairs, plan.time,
                                                     settings, edges.everything)
        rows = []
        for a, b in sorted(written):
            strength, uses, last = adj[a][b]
            rows.append((a, b, strength, uses, last))
        return EdgeChange(edges.state.version, tuple(rows), tuple(sorted(deleted)), count)


@dataclass(frozen=True, slots=True)
class EdgeView:
    """A namespace's co-use edges as a feedback's change is worked out from: those around its
    documents (with their version and count), and how to read all of them (asked only when the
    namespace is over its edge cap)."""

    state: EdgeState
    everything: Callable[[], co_use_rule.Adjacency]


def _kept(kept: KeptMeans | None, item: Item) -> np.ndarray | None:
    """The means its rerank read of a used item's features, if kept and of its row."""
    if kept is None or item.rank > len(kept.rows):
        return None
    read = kept.at(item.rank)
    return read if len(read) == len(item.judged.features) else None


class _Counts:
    """The counts a list of updates reads, as the updates before each one leave them; a
    feature whose pooled counts are withheld (:func:`~heaprank.model.privacy.withheld`, at
    ``min_namespaces``) reads its namespace's own counts as its pooled ones, as a rerank does."""

    def __init__(self, counts: Mapping[str, tuple[list[str], LinkCounts]],
                 prior: linkmath.Prior, min_namespaces: int = 1) -> None:
        self._prior = prior
        self._own: dict[tuple[str, str], list[float]] = {}
        self._pooled: dict[str, list[float]] = {}
        self._withheld: set[str] = set()
        for ns, (features, c) in counts.items():
            hidden = withheld(features, c.holders, min_namespaces)
            self._withheld.update(f for f, h in zip(features, hidden.tolist()) if h)
            for f, pos, neg, gpos, gneg in zip(features, c.pos.tolist(), c.neg.tolist(),
                                               c.gpos.tolist(), c.gneg.tolist()):
                self._own[(ns, f)] = [pos, neg]
                self._pooled.setdefault(f, [gpos, gneg])

    def means(self, plan: Plan, kept: KeptMeans | None) -> dict[str, float]:
        """The posterior means of the plan's used items' features: kept ones where given."""
        out: dict[str, float] = {}
        ns = plan.impression.namespace
        for item in plan.todo:
            features = item.judged.features
            if not item.judged.used or not features:
                continue
            read = _kept(kept, item)
            if read is not None:
                out.update(zip(features, read.tolist()))
                continue
            own = [self._own.get((ns, f), (0.0, 0.0)) for f in features]
            rows = [(*o, *(o if f in self._withheld else self._pooled.get(f, (0.0, 0.0))))
                    for f, o in zip(features, own)]
            arr = np.array(rows, dtype=np.float64).reshape(-1, 4)
            out.update(zip(features, linkmath.means_of(
                LinkCounts(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]), self._prior)))
        return out

    def add(self, ns: str, inc: linkmath.Increments) -> None:
        """Count an update's increments in, for the updates after it."""
        for f, p, n in zip(inc.features, inc.dpos.tolist(), inc.dneg.tolist()):
            own = self._own.get((ns, f))
            if own is not None:
                own[0] += p
                own[1] += n
            pooled = self._pooled.get(f)
            if pooled is not None and not f.startswith(OWN_PREFIX):
                pooled[0] += p
                pooled[1] += n
