"""Feedback: which shown items an answer used, resolved against the impression of their recall
and applied to the state once per (recall, item).

The general path (:meth:`FeedbackStage.resolve`) builds a :class:`~heaprank.records.FeedbackBatch`
from the impression and lets the state apply it atomically; a state with a lean path
(:class:`~heaprank.state.capabilities.LeanFeedback`) takes a fresh recall's feedback straight
from the impression it holds (:meth:`FeedbackStage.lean`), with the same counts; the explicit
form (``namespace=, query=, shown=``) first records the impression the feedback is about
(:meth:`FeedbackStage.record_shown`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .._checks import MAX_NAMESPACE_CHARS, check_id, check_ids, check_namespace, check_query
from .._flow import Flow
from .._time import DAY_S, FEEDBACK_EARLY_S, feedback_time_ok, resolve_now, to_epoch
from ..config import Config
from ..errors import FeedbackError, InputError, InputTypeError
from ..records import (
    LABEL_OF,
    LABELS,
    OUTDATED,
    USED,
    WRONG,
    FeedbackBatch,
    FeedbackOutcome,
    Impression,
    UsedFeedback,
    new_feedback_item,
    new_outcome,
)
from ..scoring.candidates import CandidateLike, coerce_candidates
from ..scoring.scorer import Scorer
from ..state.capabilities import Capabilities
from ..state.requests import ApplyFeedback, GetImpression, StateRequest, edges_of
from . import links as linkmath
from .impressions import ImpressionLog

#: The log position discount of an ignored item, ``1 / log2(1 + rank)``, for the usual ranks.
_LOG_DISCOUNT = [math.inf] + [1.0 / math.log2(1.0 + rank) for rank in range(1, 257)]
_NO_DISCOUNT = [1.0] * len(_LOG_DISCOUNT)

Used = Iterable[str] | str
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


def merge_labels(verdicts: dict[str, bool], labels: Mapping[str, int],
                 used: Sequence[str]) -> None:
    """Add the labels' used / not-used verdicts to ``verdicts``; a label other than ``used``
    on an id listed in ``used`` is a contradiction."""
    listed = set(used)
    for d, code in labels.items():
        if d in listed and code != USED:
            raise InputError(f"labels[{d!r}]: {LABEL_OF[code]!r}, but the id is also in used=")
        verdicts[d] = code == USED


def check_shown(labels: Mapping[str, int], shown: Sequence[str], recall_id: str) -> None:
    """Refuse a label on an id the recall did not show (before anything is written)."""
    known = set(shown)
    for d in labels:
        if d not in known:
            raise FeedbackError(f"labels: id {d!r} was not shown in recall {recall_id!r}")


def used_ids(ids: object, field: str) -> tuple[str, ...]:
    """Checked ids from one id, a list or tuple, or any other iterable of ids (read once)."""
    if isinstance(ids, str):
        return (check_id(ids, field),)
    if not isinstance(ids, (list, tuple)) and isinstance(ids, Iterable) \
            and not isinstance(ids, (bytes, Mapping)):
        ids = tuple(ids)  # a set or a generator of ids
    return check_ids(ids, field)


def named_only(outcome: FeedbackOutcome, namespace: str | None,
               named: Sequence[str]) -> FeedbackOutcome:
    """``outcome`` as a caller who did not name the recall's namespace sees it: only the ids
    it named itself (the recall's other shown ids are its namespace's to know)."""
    if namespace is not None:
        return outcome
    keep = set(named).__contains__
    return new_outcome(outcome.recall_id, tuple(filter(keep, outcome.applied)),
                       tuple(filter(keep, outcome.already_recorded)))


class FeedbackStage:
    """The feedback paths of one reranker. It reads the reranker's learning settings only
    (prior, credit, rejects, document features, co-use), which are fixed for its life."""

    def __init__(self, config: Config, caps: Capabilities, scorer: Scorer,
                 log: ImpressionLog) -> None:
        self._config = config
        self._caps = caps
        self._scorer = scorer
        self._log = log
        prior = config.prior
        #: What every lean feedback hands the state: the prior and the reject weight by rank
        self._lean_settings = (prior.a0, prior.b0, prior.kappa,
                               _LOG_DISCOUNT if config.reject_discount == "log" else _NO_DISCOUNT)

    # ------------------------------------------------------------ the general path

    def flow(self, recall_id: str | None, used: Used, now: Any, namespace: str | None,
             explicit: tuple[str | None, Sequence[CandidateLike] | None, str | None],
             labels: Mapping[str, int] | None = None) -> Flow[StateRequest, FeedbackOutcome]:
        """``feedback(recall_id, used, ...)`` as a flow; ``explicit`` is the explicit form's
        ``(query, shown, feedback_id)``; ``labels`` the checked ``labels=`` (id -> code)."""
        query, shown, feedback_id = explicit
        ids = used_ids(used, "used")
        labels = labels or {}
        merge_labels({}, labels, ids)  # a contradiction is refused before anything is read
        if recall_id is None:
            if namespace is None or query is None or shown is None:
                raise InputError("feedback: pass recall_id, or namespace=, query= and shown=")
            recall_id = yield from self.record_shown(namespace, query, shown,
                                                     (*ids, *labels), now, feedback_id, len(ids))
        elif feedback_id is not None:
            raise InputError("feedback_id: only with the explicit form (namespace=, query=, "
                             "shown=), not with a recall_id")
        outcome = yield from self.resolve(recall_id, namespace, None, ids, now, labels)
        return named_only(outcome, namespace, (*ids, *labels))

    def resolve(self, recall_id: str, namespace: str | None, verdicts: dict[str, bool] | None,
                used: Sequence[str], now: Any,
                labels: Mapping[str, int] | None = None) -> Flow[StateRequest, FeedbackOutcome]:
        """Apply verdicts on a recall's shown items; ``verdicts=None``: ``used`` are used, every
        other shown item ignored (``labels``, id -> verdict code, grade them)."""
        imp = yield from self.impression(recall_id, namespace)
        if verdicts is None:
            verdicts = self.verdicts(imp, used, labels or {})
        return (yield ApplyFeedback(self.batch(imp, verdicts, now, labels), self.credit()))

    @staticmethod
    def verdicts(imp: Impression, used: Sequence[str],
                 labels: Mapping[str, int]) -> dict[str, bool]:
        """Every shown item's verdict: ``used`` used, the labelled as labelled, the rest
        ignored (an id not shown is rejected in :meth:`batch`)."""
        check_shown(labels, imp.ids, imp.recall_id)
        verdicts = dict.fromkeys(imp.ids, False)
        verdicts.update(dict.fromkeys(used, True))
        merge_labels(verdicts, labels, used)
        return verdicts

    def impression(self, recall_id: object,
                   namespace: str | None) -> Flow[StateRequest, Impression]:
        """The impression of a recall: the one this reranker stored, or read from the state."""
        recall_id = check_id(recall_id, "recall_id")
        imp = self._log.kept(recall_id)
        if imp is None:
            imp = yield GetImpression(recall_id)
        if imp is not None and namespace is not None \
                and imp.namespace != check_namespace(namespace):
            # The same words as for an unknown id: that the recall exists elsewhere is another
            # namespace's business.
            imp = None
        if imp is None:
            raise FeedbackError(f"recall_id {recall_id!r}: unknown (never recorded, expired or "
                                f"pruned)")
        return imp

    def batch(self, imp: Impression, verdicts: dict[str, bool], now: Any,
              labels: Mapping[str, int] | None = None) -> FeedbackBatch:
        """The feedback batch of verdicts on an impression's shown items; ``labels`` (id ->
        verdict code) grade them: an ``outdated`` item teaches its links nothing (its shape
        was right, its version old: the evidence is the tuning log's, for recency), a ``wrong``
        one rejects them with :data:`WRONG_WEIGHT`."""
        position = dict(zip(imp.ids, range(1, len(imp.ids) + 1)))
        if not position.keys() >= verdicts.keys():
            unknown = next(d for d in verdicts if d not in position)  # the first, in order
            raise FeedbackError(f"id {unknown!r} was not shown in recall {imp.recall_id!r}")
        if now is None:
            # The impression's clock, when the caller chose it: never mix in the wall clock.
            when = imp.time if imp.time_explicit else resolve_now(None)[0]
        else:
            when = to_epoch(now, "now")
        if not feedback_time_ok(when, imp.time):
            raise FeedbackError(f"now: {when:.0f} is {(when - imp.time) / DAY_S:+.1f} days from "
                                f"its recall's rerank (feedback is accepted from "
                                f"{FEEDBACK_EARLY_S:.0f} s before it to 366 days after)")
        cfg = self._config
        expand, qtype, slots, docs = (self._scorer.space.expand, imp.qtype, imp.slots,
                                      imp.doc_features)
        # What the rerank read of the shown items' links, for a state that can tell they
        # still hold (FeedbackBatch.means)
        read = self._log.means.pop(imp.recall_id, None) if cfg.em_credit else None
        means: dict[int, np.ndarray] = {}
        items = []
        graded = labels or {}
        for d, used in verdicts.items():
            rank = position[d]
            code = graded.get(d, 0)
            features = () if code == OUTDATED else expand(qtype, slots[rank - 1],
                                                          d if docs else None)
            weight = (0.0 if code == OUTDATED else WRONG_WEIGHT if code == WRONG
                      else self.reject_weight(rank))
            items.append(new_feedback_item(d, rank, used, features, weight,
                                           code if code > USED else 0))
            if used and read is not None and rank <= len(read[2]):
                means[rank] = read[1][read[2][rank - 1]]
        prior, co_use = cfg.prior, cfg.co_use
        if co_use is not None:
            edges_of(self._caps)  # refused before anything is applied
        return FeedbackBatch(recall_id=imp.recall_id, namespace=imp.namespace, time=when,
                             items=tuple(items), a0=prior.a0, b0=prior.b0, kappa=prior.kappa,
                             em=cfg.em_credit, co_use=co_use,
                             shown=imp.ids if co_use is not None else (), means=means,
                             means_version=None if read is None else read[0])

    def reject_weight(self, rank: int) -> float:
        """The reject weight of an ignored item shown at ``rank`` (from 1)."""
        if self._config.reject_discount != "log":
            return 1.0
        return _LOG_DISCOUNT[rank] if rank < len(_LOG_DISCOUNT) else 1.0 / math.log2(1.0 + rank)

    def credit(self) -> functools.partial[tuple[list[str], np.ndarray, np.ndarray]]:
        return functools.partial(linkmath.credit, prior=self._config.prior,
                                 em=self._config.em_credit)

    # ------------------------------------------------------------ the lean path

    def lean(self, recall_id: object, used: Used, namespace: str | None,
             now: Any) -> tuple[FeedbackOutcome | None, Used]:
        """``(outcome, used)``: the state's lean path for a fresh recall, or no outcome where
        the general path must run (no lean path, co-use on, an error), with ``used`` read once
        when it was an iterator.

        ``used`` is not checked id by id here: the lean path takes it only when every entry is
        one of the shown ids, which were checked when they were shown, and it is a list of
        plain strings; any other ``used`` goes the general way, whose checks raise the
        errors."""
        lean = self._caps.lean
        if lean is None:
            return None, used
        if type(used) is not list and type(used) is not tuple and type(used) is not str:
            used = used_ids(used, "used")  # a set or a generator: read once, here
        if self._config.co_use is not None or not isinstance(recall_id, str):
            return None, used
        ids: Sequence[str] = (used,) if isinstance(used, str) else used  # type: ignore[assignment]
        for d in ids:
            if type(d) is not str:  # a str subclass included: check_id takes its plain value
                return None, used
        try:
            when = None if now is None else to_epoch(now, "now")
        except (ValueError, TypeError):  # raised by the general path, after its own checks
            return None, used
        em = self._config.em_credit
        read = self._log.means.get(recall_id) if em else None
        a0, b0, kappa, weights = self._lean_settings
        out = lean.apply_used(UsedFeedback(recall_id, namespace, ids, when, a0, b0, kappa, em,
                                           weights, self.reject_weight, read))
        if out is None:
            return None, used
        self._log.means.pop(recall_id, None)
        return named_only(out, namespace, ids), used

    # ------------------------------------------------------------ several at once

    def apply_many(self, batches: list[FeedbackBatch]) -> list[FeedbackOutcome | FeedbackError]:
        """Apply ready batches: in one transaction on a state with group feedback, else one
        after the other (each still atomic)."""
        if self._caps.group is not None:
            return self._caps.group.apply_feedback_many(batches, self.credit())
        done: list[FeedbackOutcome | FeedbackError] = []
        for batch in batches:
            try:
                done.append(self._caps.state.apply_feedback(batch, self.credit()))
            except FeedbackError as exc:
                done.append(exc)
        return done

    # ------------------------------------------------------------ the explicit form

    def record_shown(self, namespace: str, query: str, shown: Sequence[CandidateLike],
                     used: tuple[str, ...], now: Any,
                     feedback_id: str | None, n_used: int | None = None) -> Flow[StateRequest, str]:
        """Record the impression an explicit feedback is about: its recall id. ``used``: the
        ids it names (the first ``n_used`` of them in ``used=``, the others labelled)."""
        namespace = check_namespace(namespace)
        query = check_query(query)
        if feedback_id is not None:
            if not isinstance(feedback_id, str):
                raise InputTypeError(f"feedback_id: expected str, got {type(feedback_id).__name__}")
            if not feedback_id or len(feedback_id) > MAX_NAMESPACE_CHARS:
                raise InputError(f"feedback_id: must be 1 to {MAX_NAMESPACE_CHARS} characters")
        when, explicit = resolve_now(now)
        cfg = self._config
        batch = coerce_candidates(shown, now=when, on_invalid=cfg.on_invalid,
                                  future_tolerance_s=cfg.future_tolerance_s)
        unknown = [d for d in used if d not in set(batch.ids)]
        if unknown:  # checked before anything is written: no orphan impression
            field = "used" if unknown[0] in used[:n_used] else "labels:"
            raise FeedbackError(f"{field} id {unknown[0]!r} is not among the shown ids")
        seen = self._scorer.read(batch, query, cfg)
        slots_of = self._scorer.space.slots_of
        held = yield from self._log.put(Impression(
            recall_id=self._log.mint(namespace), namespace=namespace, qtype=seen.info.qtype, time=when,
            time_explicit=explicit, ids=batch.ids,
            slots=tuple(slots_of(r) for r in seen.rows[seen.row_of].tolist()),
            doc_features=cfg.doc_features), feedback_id)
        if feedback_id is not None:
            stored = yield GetImpression(held)
            if stored is None or stored.ids != batch.ids:
                raise FeedbackError(f"feedback_id {feedback_id!r} was already used in this "
                                    f"namespace for another shown list")
        return held
