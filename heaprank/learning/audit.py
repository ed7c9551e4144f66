"""Reading back what was learned: every link with its posterior and a credible interval, and
what a retention policy would forget (a preview: nothing is deleted)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._time import DAY_S
from ..config import Config
from ..errors import StateError
from ..model import links as linkmath
from ..model import retention as ret
from ..model.privacy import CODEBOOK, mask_pooled, withheld
from ..model.questions import QUESTION_TYPES
from ..scoring import signals as sig
from ..scoring.candidates import CandidateLike, coerce_candidates
from ..state.base import StateBackend
from ..state.capabilities import DocLister

#: The slot names heaprank itself writes before a slot's value (``kind:``, ``tag:``...): kept
#: in a digest, so a withheld name still says what kind of slot it is.
_SLOT_HEADS = frozenset({"kind", "source", "len", "date", "num", "ent", "q", "qsrc", "qent",
                         "prev", "next", "person", "tag", "doc"})
_QT_HEADS = frozenset(f"qt:{q}&" for q in QUESTION_TYPES)
DIGEST_CHARS = 16


def pooled_name(feature: str) -> str:
    """How the pooled listing shows ``feature``: a codebook name as it is; any other (it holds
    a caller's value: a kind, source or tag outside the codebook, a document id) as its slot
    and the first :data:`DIGEST_CHARS` hex digits of the SHA-256 of the whole name, e.g.
    ``source:#3f2a...``: the same name always maps to the same digest, unreadable."""
    if feature in CODEBOOK:
        return feature
    digest = hashlib.sha256(feature.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    rest, head = feature, ""
    amp = feature.find("&")
    if amp > 0 and feature[:amp + 1] in _QT_HEADS:
        head, rest = feature[:amp + 1], feature[amp + 1:]
    slot = rest.split(":", 1)[0]
    return f"{head}{slot}:#{digest}" if slot in _SLOT_HEADS and ":" in rest \
        else f"{head}#{digest}"


@dataclass(frozen=True, slots=True)
class Link:
    """One learned link: P(useful | feature) with its evidence and a 90% interval."""

    feature: str
    p: float
    n: float
    low: float
    high: float
    pos: float
    neg: float


def links_of(state: StateBackend, namespace: str | None, prior: linkmath.Prior, *,
             min_n: float, level: float, min_namespaces: int = 1) -> list[Link]:
    """Every link of ``namespace`` (None: the pooled layer) with at least ``min_n`` evidence,
    strongest first; a namespace's links borrow the pooled prior as its reranks do (a caller's
    value held by fewer than ``min_namespaces`` namespaces borrows nothing:
    :func:`~heaprank.model.privacy.mask_pooled`). The pooled layer shows each name that holds a
    caller's value as a digest (:func:`pooled_name`): it is every tenant's view, so no
    tenant's strings are in it; and it leaves out such a name while fewer than
    ``min_namespaces`` namespaces hold it (its digest would tell a tenant who guessed the
    value that another used it)."""
    features, pos, neg = state.list_links(namespace)
    if namespace is None:
        if min_namespaces > 1 and features:  # (the read's own counts, of "*", are not used)
            shown = ~withheld(features, state.read_links("*", features).holders,
                              min_namespaces)
            features = [f for f, keep in zip(features, shown.tolist()) if keep]
            pos, neg = pos[shown], neg[shown]
        features = [pooled_name(f) for f in features]
        alpha, beta = linkmath.global_posterior(pos, neg, prior)
    else:
        counts = mask_pooled(features, state.read_links(namespace, features), min_namespaces)
        alpha, beta = linkmath.posterior(counts, prior)
    if not features:
        return []
    p = linkmath.posterior_mean(alpha, beta)
    low, high = linkmath.interval(alpha, beta, level)
    n = pos + neg
    rows = [Link(f, float(p[i]), float(n[i]), float(low[i]), float(high[i]), float(pos[i]),
                 float(neg[i])) for i, f in enumerate(features) if n[i] >= min_n]
    rows.sort(key=lambda r: (-r.p, r.feature))
    return rows


def forget_preview(state: StateBackend, docs: DocLister | None, namespace: str,
                   candidates: Sequence[CandidateLike] | None, when: float,
                   policy: ret.RetentionPolicy, cfg: Config) -> ret.ForgetReport:
    """What ``policy`` would forget of ``namespace``'s ``candidates`` at ``when`` (None: of the
    documents the state lists through ``docs``, at the neutral importance: the state keeps
    none)."""
    if candidates is None:
        if docs is None:
            raise StateError(f"forget_candidates: {state!r} cannot list its documents; "
                             f"pass candidates=")
        rows = docs.iter_docs(namespace)
        ids = tuple(r[0] for r in rows)
        last = np.array([r[1] for r in rows], dtype=np.float64)
        uses = np.array([r[2] for r in rows], dtype=np.float64)
        importance = np.ones(len(ids))
    else:
        batch = coerce_candidates(candidates, now=when, on_invalid=cfg.inputs.on_invalid,
                                  future_tolerance_s=cfg.inputs.future_tolerance_s)
        stats = state.read(namespace, [], batch.ids)[1]
        ids, uses = batch.ids, stats.use_count
        last = np.fmax(np.fmax(stats.last_used, batch.last_used), batch.created_at)
        importance = sig.importance(batch, cfg.scoring.kind_importance)
    age_days = (when - np.minimum(last, when)) / DAY_S  # a stored time after now counts as now
    return ret.forget_report(namespace, ids, age_days, importance, uses, policy)
