"""Features: the shape of a memory crossed with the type of question. Never its words.

Every candidate fills each slot exactly once, so the noisy-OR over its features always has the
same number of terms and, with no feedback anywhere, every candidate's usefulness is the same.

Shape slots (from the candidate alone, cached per ``(id, text hash)``)::

    kind:<kind|none>  source:<source|none>  len:<bucket>  date:yes|no  num:yes|no
    ent:yes|no  q:yes|no  [tag:<name>=yes|no for each configured tag]
    [time|money|count|dur|rate|wday|place:yes|no for each ``Config.answer_slots`` family]

Relation slots (query x candidate, still no words)::

    qsrc:yes|no   the question names the candidate's source or speaker
    qent:yes|no   a capitalised name of the question appears in the candidate
    person:<first|second|third>/<user|assistant|other>   (``Config.features.speaker_roles``) whose
                  statements the question asks about (its grammatical person) crossed with
                  the candidate's source role

First-stage slots (``Config.features.stage_slots``, from the retriever's order alone, never its words)::

    rank:1|2|3-5|6-10|>10        the candidate's place in the retriever's order
    gap:0|<=0.1|<=0.25|<=0.5|>0.5  its score's gap to the retriever's top, as a share of the
                                 list's score span (so the same on any score scale)

The question's temporal intent (:func:`temporal_intent`: ``recent``, ``past`` or ``none``) is
not a slot: it scales the recency weight (``Config.scoring.intent_recency``).

Each slot also appears crossed with the question type, ``qt:when&date:yes``; optionally
``doc:<id>`` is appended ("this very document keeps being useful").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .answer_types import ANSWER_FAMILIES, answer_slots
from .questions import PERSONS, QUESTION_TYPES, ROLES, QueryInfo, person_slot
from .text import _DATE, _NUM, names, tokens

# Word-count buckets: finer than short/medium/long (the turn length matters on LoCoMo).
_LEN_EDGES = (3, 6, 10, 15, 22, 32, 48)


def length_bucket(n_words: int) -> str:
    for edge in _LEN_EDGES:
        if n_words <= edge:
            return f"len:<={edge}"
    return f"len:>{_LEN_EDGES[-1]}"


@dataclass(frozen=True, slots=True)
class Shape:
    """A candidate's cached shape: its slot features and the names it mentions."""

    slots: tuple[str, ...]
    words: frozenset[str]


def yes(flag: bool) -> str:
    return "yes" if flag else "no"


def expand_features(qtype: str, slots: Sequence[str], doc_id: str | None = None) -> tuple[str, ...]:
    """A candidate's retrieval features from its slots: the slots, each slot x the question type,
    then ``doc:<id>`` when document features are on. The single definition of a feature row:
    rerank builds rows with it, and feedback rebuilds them from a stored impression with it."""
    canonical = _CANONICAL.get
    out = tuple(slots) + tuple(f"qt:{qtype}&{s}" for s in slots)
    # Codebook features as one shared string object each: every dict that holds them (the
    # feature space's, a state's) then matches them by identity, without comparing bytes.
    out = tuple(map(canonical, out, out))
    if doc_id is not None:
        out = out + (f"doc:{doc_id}",)
    return out


def shape_of(text: str, kind: str | None, source: str | None, tags: frozenset[str],
             tag_slots: Sequence[str], answer_families: Sequence[str] = ()) -> Shape:
    """A candidate's shape slots (the module's list), then a ``tag:`` slot per configured tag
    and an answer-type slot per family of ``answer_families`` (:mod:`.answer_types`)."""
    toks = tokens(text)
    stripped = text.rstrip()
    slots = [
        f"kind:{kind or 'none'}",
        f"source:{source or 'none'}",
        length_bucket(len(toks)),
        f"date:{yes(bool(_DATE.search(text)))}",
        f"num:{yes(bool(_NUM.search(text)))}",
        f"ent:{yes(bool(names(text)))}",
        f"q:{yes(stripped.endswith(('?', '？')))}",
    ]
    slots.extend(f"tag:{t}={yes(t in tags)}" for t in tag_slots)
    slots.extend(answer_slots(text, answer_families))
    return Shape(slots=tuple(slots), words=frozenset(t.casefold() for t in toks))


def relation_slots(query: QueryInfo, shape: Shape, source: str | None) -> tuple[str, str]:
    names_source = source is not None and bool(
        {t.casefold() for t in tokens(source)} & query.words)
    shares_name = bool(query.names & shape.words)
    return f"qsrc:{yes(names_source)}", f"qent:{yes(shares_name)}"


def retrieval_features(query: QueryInfo, shape: Shape, source: str | None,
                       doc_id: str | None, structure: tuple[str, ...] = (),
                       speaker_roles: bool = False) -> tuple[str, ...]:
    """All features of one candidate for one query: its slots (shape, relation, ``structure``
    from :func:`neighbour_slots`, the ``person:`` slot with ``speaker_roles``), each slot x the
    question type, then ``doc:``."""
    slots = shape.slots + relation_slots(query, shape, source) + structure
    if person_slotted(query, speaker_roles):
        slots = slots + (person_slot(query.person, source),)
    return expand_features(query.qtype, slots, doc_id)


def person_slotted(query: QueryInfo, speaker_roles: bool) -> bool:
    """Whether a query's candidates carry the ``person:`` slot: with ``speaker_roles``, for a
    question about the user's or the assistant's own words (first or second person). A
    third-person question leaves it out for every candidate alike: its role says nothing
    there, and one more term in the noisy-OR of every candidate cost LoCoMo (third-person
    questions) up to 0.002 MRR."""
    return speaker_roles and query.person != "third"


def _rank_bucket(rank: int) -> str:
    if rank < 0:
        return "none"
    if rank == 0:
        return "top1"
    if rank < 3:
        return "top3"
    if rank < 10:
        return "top10"
    return "lower"


NO_NEIGHBOURS = ("prev:none", "next:none")
_BUCKETS = ("top1", "top3", "top10", "lower", "none")
NEIGHBOUR_CODE: dict[tuple[str, ...], int] = {(f"prev:{a}", f"next:{b}"): 5 * i + j
                   for i, a in enumerate(_BUCKETS) for j, b in enumerate(_BUCKETS)}


def neighbour_slots(threads: Sequence[str | None], positions: Sequence[float],
                    retriever_rank: Sequence[int]) -> list[tuple[str, ...]]:
    """Each candidate's structural neighbours among the candidates: how high the retriever
    ranked the turn just before it (``prev:``) and just after it (``next:``) in the same
    thread, as ``top1 | top3 | top10 | lower | none``. Evidence often sits next to the turn
    that matched the question (the answer after the question that names the topic)."""
    where: dict[tuple[str, float], int] = {}
    for i, (thread, pos) in enumerate(zip(threads, positions)):
        if thread is not None and pos == pos:  # NaN-safe
            where[(thread, pos)] = i
    if not where:
        return [NO_NEIGHBOURS] * len(threads)
    out: list[tuple[str, ...]] = []
    for thread, pos in zip(threads, positions):
        prev = where.get((thread, pos - 1), -1) if thread is not None else -1
        nxt = where.get((thread, pos + 1), -1) if thread is not None else -1
        out.append((f"prev:{_rank_bucket(retriever_rank[prev] if prev >= 0 else -1)}",
                    f"next:{_rank_bucket(retriever_rank[nxt] if nxt >= 0 else -1)}"))
    return out


RANK_SLOTS = ("rank:1", "rank:2", "rank:3-5", "rank:6-10", "rank:>10")
GAP_SLOTS = ("gap:0", "gap:<=0.1", "gap:<=0.25", "gap:<=0.5", "gap:>0.5")
_RANK_EDGES = np.array([1, 2, 5, 10])  # 0-based rank below an edge: that bucket
#: Structure codes: ``neighbour code + N_NEIGHBOUR_CODES x stage`` where stage is 0 without
#: first-stage slots, else ``1 + 5 x rank bucket + gap bucket``.
N_NEIGHBOUR_CODES = len(NEIGHBOUR_CODE)
N_STRUCTURE_CODES = N_NEIGHBOUR_CODES * (1 + len(RANK_SLOTS) * len(GAP_SLOTS))
_BY_CODE = {code: slots for slots, code in NEIGHBOUR_CODE.items()}
#: The slots of each structure code.
STRUCTURE_SLOTS: tuple[tuple[str, ...], ...] = tuple(
    _BY_CODE[code % N_NEIGHBOUR_CODES] + (
        () if code < N_NEIGHBOUR_CODES else
        (RANK_SLOTS[(code // N_NEIGHBOUR_CODES - 1) // len(GAP_SLOTS)],
         GAP_SLOTS[(code // N_NEIGHBOUR_CODES - 1) % len(GAP_SLOTS)]))
    for code in range(N_STRUCTURE_CODES))
NO_STRUCTURE = NEIGHBOUR_CODE[NO_NEIGHBOURS]
#: The code of each structure's slots (the inverse of :data:`STRUCTURE_SLOTS`).
STRUCTURE_CODE = {slots: code for code, slots in enumerate(STRUCTURE_SLOTS)}


#: ``N_NEIGHBOUR_CODES x 5 x rank bucket`` of each place in the retriever's order (0-based).
_RANK_PART = N_NEIGHBOUR_CODES * len(GAP_SLOTS) * np.minimum(
    np.searchsorted(_RANK_EDGES, np.arange(4096), side="right"), len(RANK_SLOTS) - 1)
_GAP_EDGES = np.array([0.0, 0.1, 0.25, 0.5])  # x the span: a gap above each edge


def stage_codes(order: np.ndarray, relevance: np.ndarray) -> np.ndarray:
    """Each candidate's first-stage part of its structure code, ``N_NEIGHBOUR_CODES x (1 + 5 x
    rank bucket + gap bucket)``: ``order`` is the retriever's order (best first), ``relevance``
    the normalised scores it was ordered by (the gap is read as a share of their span, so any
    score scale gives the same buckets). A few numpy calls, no loop per candidate."""
    n = len(order)
    rank_part = _RANK_PART[:n] if n <= len(_RANK_PART) else N_NEIGHBOUR_CODES * len(
        GAP_SLOTS) * np.searchsorted(_RANK_EDGES, np.arange(n), side="right")
    ranked = relevance[order]
    hi, lo = float(np.maximum.reduce(ranked)), float(np.minimum.reduce(ranked))
    gap = hi - ranked
    span = hi - lo
    part = rank_part + N_NEIGHBOUR_CODES
    if span > 0:  # the bucket: how many edges the gap is above
        part += N_NEIGHBOUR_CODES * np.searchsorted(_GAP_EDGES * span, gap, side="left")
    out = np.empty(n, dtype=np.intp)
    out[order] = part
    return out


# The slot codebook of stored impressions: slots that carry no caller data get a fixed one-byte
# code, so an impression stores ~11 bytes of features per shown item instead of ~400 bytes of
# names. Append only: a stored code must keep its meaning in every later version.
_COMMON_KINDS = ("instruction", "preference", "decision", "error", "summary", "insight", "fact",
                 "note", "episode", "tool_result")
FIXED_SLOTS: tuple[str, ...] = (
    ("kind:none", "source:none")
    + tuple(f"kind:{k}" for k in _COMMON_KINDS)
    + tuple(f"len:<={e}" for e in _LEN_EDGES) + (f"len:>{_LEN_EDGES[-1]}",)
    + tuple(f"{slot}:{v}" for slot in ("date", "num", "ent", "q", "qsrc", "qent")
            for v in ("yes", "no"))
    + tuple(f"{side}:{b}" for side in ("prev", "next")
            for b in ("top1", "top3", "top10", "lower", "none"))
    + tuple(f"source:{s}" for s in ("user", "assistant", "system", "tool"))
    + tuple(f"person:{p}/{r}" for p in PERSONS for r in ROLES)
    + RANK_SLOTS + GAP_SLOTS
    + tuple(f"{family}:{v}" for family in ANSWER_FAMILIES for v in ("yes", "no"))
)

#: The codebook's slots and their crossings with every question type, each as one string object
#: (no caller data: kinds, sources, tags and document ids outside the codebook are not in it).
_CANONICAL: dict[str, str] = {f: f for f in FIXED_SLOTS + tuple(
    f"qt:{q}&{slot}" for q in QUESTION_TYPES for slot in FIXED_SLOTS)}

