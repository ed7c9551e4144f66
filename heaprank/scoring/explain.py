"""The results of a scored rerank: the top ``k`` as :class:`~heaprank.scoring.results.Ranked`
items, each with what its signal values came from (its EXPLAIN details), in a
:class:`~heaprank.scoring.results.Ranking` that keeps what ``why_not`` needs about the rest.

Everything shared by the results of one call (the weights, the EXPLAIN template, the flags) is
built once; each result's EXPLAIN line is composed when first asked for, and its signals and
details (but details with notes) when first read, from one
:class:`~heaprank.scoring.results.ResultSource` of the call.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from .._time import DAY_S
from ..config import SIGNALS
from . import rank
from .candidates import Candidate
from .results import (
    AGE_DETAIL,
    SCORE_DETAIL,
    Ranked,
    Ranking,
    ResultSource,
    exp_score,
    explain_template,
    new_ranked_all,
)
from .scorer import Scored
from .spreading import co_used_with
from .standings import Standings

#: EXPLAIN's flag on every result of a query with no content words.
NO_CONTENT = "query has no content words: ranked by the other signals"

TopLinks = Mapping[int, tuple[tuple[str, float], ...]]


class _Shown(NamedTuple):
    """The values of the ``k`` shown candidates that the results read, as lists."""

    positions: list[int]  # each one's index among the candidates
    logs: list[float]
    scores: list[float]
    ages: list[float]
    uses: list[float]
    rows: list[list[Any]]  # signal values, then the three details and the top links' text
    importance: list[float]  # explicit doses (NaN: none)
    source_count: list[float]


def ranking(scored: Scored, recall_id: str, top_links: TopLinks,
            untracked: str | None = None) -> Ranking:
    """The :class:`Ranking` of ``scored`` under ``recall_id``; ``top_links`` holds the strongest
    links of each shown item's feature row; ``untracked``: EXPLAIN's flag of why the rerank was
    not recorded, when it was asked to be and could not be."""
    seen, request = scored.seen, scored.request
    batch, fired, order = seen.batch, scored.fired, scored.order
    dropped = {} if scored.kept is None or scored.kept.all() else {
        batch.ids[i]: "rule " + ", ".join(f"{n} x{m:.3g}" for n, m in fired[i])
        for i in np.flatnonzero(~scored.kept).tolist()}
    # Its fields put straight into the instance: a frozen dataclass's __init__ sets each one
    # through object.__setattr__ (twice the cost), and every rerank makes one.
    made = object.__new__(Ranking)
    vars(made).update(
        recall_id=recall_id, namespace=request.namespace, query=request.query,
        qtype=seen.info.qtype, items=_results(scored, top_links, untracked),
        standings=Standings(batch.ids, order, scored.log_score, scored.log_terms,
                            scored.log_rules),
        signal_names=SIGNALS, dropped=dropped,
        degraded=bool(scored.evidence.flags) or untracked is not None)
    return made


def _shown(scored: Scored) -> _Shown:
    batch, top = scored.seen.batch, scored.top
    no_importance, no_sources = batch.absent("importance"), batch.absent("source_count")
    logs, scores, ages, uses, rows, *more = rank.take(top, (
        scored.log_score, batch.scores, scored.signals.age, scored.evidence.docs.use_count,
        scored.matrix,
        *(() if no_importance else (batch.importance,)),
        *(() if no_sources else (batch.source_count,))))
    nan = [math.nan] * len(top)
    importance = nan if no_importance else more.pop(0)
    source_count = nan if no_sources else more.pop(0)
    return _Shown(top.tolist(), logs, scores, ages, uses, rows, importance, source_count)


def _results(scored: Scored, top_links: TopLinks,
             untracked: str | None) -> tuple[Ranked, ...]:
    seen, weight_row = scored.seen, scored.weights
    batch, info = seen.batch, seen.info
    shown = _shown(scored)
    _add_details(scored, shown)
    source = ResultSource(SIGNALS, explain_template(SIGNALS, weight_row.values), shown.rows,
                          scored.top_rows, scored.evidence.links.link_texts)
    flags = scored.evidence.flags + (() if untracked is None else (untracked,)) + (
        () if info.has_content else (NO_CONTENT,))
    positions, stored, own_flags = shown.positions, batch.items, batch.flags
    candidates = [item if type(item) is Candidate else batch.candidate(i)
                  for i, item in zip(positions, map(stored.__getitem__, positions))]
    try:
        final = list(map(math.exp, shown.logs))
    except OverflowError:  # past the float range: inf, as exp_score gives
        final = list(map(exp_score, shown.logs))
    details: list[dict[str, str] | ResultSource] | itertools.repeat[ResultSource]
    if not _has_notes(scored):
        details = itertools.repeat(source)
    else:
        details = []
        for j, i in enumerate(positions):
            made = source.details(j)
            for name, note in _notes(scored, i).items():
                made[name] = f"{made[name]}, {note}" if name in made else note
            details.append(made)
    fired = scored.fired
    rules = [tuple(fired.get(i, ())) for i in positions] if fired else itertools.repeat(())
    shown_flags = [own_flags[i] + flags if flags else own_flags[i] for i in positions]
    return new_ranked_all(tuple(zip(
        range(1, len(positions) + 1), final, candidates, itertools.repeat(source),
        itertools.repeat(dict(zip(SIGNALS, weight_row.values))), details,
        map(top_links.__getitem__, scored.top_rows), rules, shown_flags,
        itertools.repeat(source))))


def _has_notes(scored: Scored) -> bool:
    return bool(scored.signals.usage.stored) or scored.signals.sampled is not None \
        or scored.linked is not None


def _notes(scored: Scored, i: int) -> dict[str, str]:
    """What candidate ``i``'s EXPLAIN details add beyond the three every result has: the
    stability behind an Ebbinghaus recency, the use count behind reinforcement, an explored
    usefulness, the co-use behind an association factor."""
    signals, cfg = scored.signals, scored.request.config
    out = signals.usage.notes(i, float(scored.evidence.docs.use_count[i]), cfg.retention.reinforcement_cap)
    if signals.sampled is not None:
        out["usefulness"] = f"explored: sampled usefulness, mean {signals.use[i]:.2f}"
    linked = scored.linked
    if linked is not None and linked.partner[i] >= 0:
        out["association"] = co_used_with(scored.seen.batch.ids, linked, i)
    return out


def _add_details(scored: Scored, shown: _Shown) -> None:
    """What each shown candidate's relevance, recency and importance came from, for EXPLAIN:
    appended to its row of signal values, then a place for its top links' text (see
    :class:`ResultSource`). The usual relevance and recency go in as the numbers of
    :data:`SCORE_DETAIL` and :data:`AGE_DETAIL`: the EXPLAIN line formats them itself."""
    seen, cfg = scored.seen, scored.request.config
    batch, info, fused = seen.batch, seen.info, seen.fused
    fused_names = tuple(cfg.scoring.fusion_weights)
    # the note says why the recency exponent is not the weight (a question with no intent and
    # a multiplier of 1 needs none)
    scale = cfg.scoring.intent_recency.get(info.intent, 1.0)
    asks = f", asks for {info.intent}" if info.intent != "none" and scale != 1.0 else ""
    numbers = info.has_content and fused is None and not asks
    all_nan = None
    for row, i, score, imp, sources, age_s, uses in zip(
            shown.rows, shown.positions, shown.scores, shown.importance, shown.source_count,
            shown.ages, shown.uses):
        origin = "explicit" if imp == imp else batch.kinds[i] or "default"
        if sources == sources:
            origin += f", {sources:g} sources"
        if numbers and score == score and age_s == age_s and not uses > 0:
            row += score, age_s / DAY_S, origin, ""
            continue
        if not info.has_content:
            rel = "empty query"
        elif score != score:  # NaN
            if all_nan is None:
                all_nan = bool(np.isnan(batch.scores).all())
            rel = f"rank {i + 1}" if all_nan else "no valid score"
        else:
            rel = SCORE_DETAIL % score
        if fused is not None:  # the other retriever scores fused into relevance
            rel += "".join(f", {n} {v:.3g}" if v == v else f", no {n}"
                           for n, v in zip(fused_names, fused[i].tolist()))
        if age_s != age_s:
            rec = "no date"
        elif uses > 0:
            rec = f"{AGE_DETAIL % (age_s / DAY_S)}, used {uses:g}x"
        else:
            rec = AGE_DETAIL % (age_s / DAY_S)
        row += rel, rec + asks, origin, ""
