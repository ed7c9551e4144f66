"""First stages that re-order LoCoMo's BM25 top 50 before heaprank sees them (issue 24).

Every first stage keeps the same candidate set (BM25 top 50 of the question's conversation,
:func:`~benchmarks.quality.harness.data.build_candidates`) and hands heaprank its own order and score:

- ``bm25``: the BM25 score itself;
- ``fusion``: the mean of the min-max normalised BM25 score and the min-max normalised MiniLM
  cosine over the 50, the blend ``Config(scoring=Scoring(fusion_weights={"dense": 1.0}))`` computes from the
  same two scores (heaprank's fusion maps it onto ``[floor, 1]``: the same order);
- ``rrf``: reciprocal-rank fusion, ``1 / (60 + rank_bm25) + 1 / (60 + rank_cosine)`` with
  ranks from 1 within the 50 (scores near 0.016-0.033: a compressed scale);
- ``ltr``: a LightGBM LambdaRank model (:class:`LambdaRank`) over the features of
  :data:`LTR_FEATURES`, trained on the evidence labels of the training conversations only.
  Its scores are raw model outputs (logits, often negative).

Ties go to the BM25 order, so every list is deterministic.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .harness.data import BM25Scorer, CandidateList, Dataset, DenseScorer, minmax

STAGES = ("bm25", "fusion", "ltr", "rrf")
STAGE_LABEL = {"bm25": "BM25 (bm25s), top 50",
               "fusion": "BM25 + MiniLM cosine, min-max mean",
               "rrf": "reciprocal-rank fusion of BM25 and cosine",
               "ltr": "LightGBM LambdaRank (training conversations' evidence)"}
RRF_K = 60.0

#: The LambdaRank model's features, per (question, candidate); the question type is categorical.
LTR_FEATURES = ("bm25", "bm25_rank", "cosine", "cosine_rank", "turn_words", "digits", "date",
                "session", "position", "qtype", "speaker_named", "question_mark",
                "question_words")
#: Fixed before any run (LightGBM's usual ranking settings, one thread: the cores are shared);
#: nothing here was tuned on LoCoMo.
LTR_PARAMS = {"objective": "lambdarank", "n_estimators": 150, "learning_rate": 0.05,
              "num_leaves": 31, "min_child_samples": 20, "subsample": 1.0,
              "colsample_bytree": 1.0, "random_state": 0, "n_jobs": 1, "deterministic": True,
              "force_row_wise": True, "verbose": -1}

_DIGIT = re.compile(r"\d")
_DATE = re.compile(r"\b(?:january|february|march|april|may|june|july|august|september|october|"
                   r"november|december|monday|tuesday|wednesday|thursday|friday|saturday|"
                   r"sunday|yesterday|today|tomorrow|week|month|year|19\d\d|20\d\d)\b",
                   re.IGNORECASE)
_WORD = re.compile(r"\w+")


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each score, best first, ties by position."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    out = np.empty(len(scores), dtype=np.float64)
    out[order] = np.arange(1, len(scores) + 1)
    return out


class StageInputs:
    """BM25 top 50 of every question with both raw scores over it."""

    def __init__(self, data: Dataset, bm25: BM25Scorer, dense: DenseScorer | None,
                 lists: list[CandidateList]) -> None:
        self.data = data
        self.lists = lists
        self.bm25 = [cl.scores for cl in lists]
        self.cosine = ([dense.scores(q)[cl.turns] for q, cl in zip(data.questions, lists)]
                       if dense is not None else None)

    def ordered(self, qi: int, scores: np.ndarray) -> CandidateList:
        """The question's candidates best first by ``scores`` (ties: BM25 order)."""
        turns = self.lists[qi].turns
        order = np.lexsort((np.arange(len(turns)), -scores))
        return CandidateList(turns[order], np.asarray(scores, dtype=np.float64)[order])

    def stage_scores(self, qi: int, stage: str) -> np.ndarray:
        sb = self.bm25[qi]
        if stage == "bm25" or len(sb) == 0:
            return sb
        assert self.cosine is not None, "dense scores needed"
        sd = self.cosine[qi]
        if stage == "fusion":
            return np.round(0.5 * minmax(sb) + 0.5 * minmax(sd), 12)
        if stage == "rrf":
            return np.round(1.0 / (RRF_K + _ranks(sb)) + 1.0 / (RRF_K + _ranks(sd)), 12)
        raise ValueError(f"stage {stage!r} is not a fixed formula")

    def fixed_lists(self, stage: str) -> list[CandidateList]:
        return [self.ordered(qi, self.stage_scores(qi, stage))
                for qi in range(len(self.data.questions))]

    # --------------------------------------------------------------- LambdaRank

    def features(self, qi: int) -> np.ndarray:
        """``(n, len(LTR_FEATURES))`` features of one question's candidates."""
        from heaprank.model.questions import QUESTION_TYPES, english_question_type

        q = self.data.questions[qi]
        conv = self.data.conversations[q.conv]
        turns = [conv.turns[t] for t in self.lists[qi].turns.tolist()]
        sb = self.bm25[qi]
        assert self.cosine is not None
        sd = self.cosine[qi]
        qtext = q.text.casefold()
        qtype = float(QUESTION_TYPES.index(english_question_type(q.text)))
        qwords = float(len(_WORD.findall(q.text)))
        rows = [[len(_WORD.findall(t.text)), bool(_DIGIT.search(t.text)),
                 bool(_DATE.search(t.text)), t.session, t.position, qtype,
                 t.speaker.casefold() in qtext, t.text.rstrip().endswith("?"), qwords]
                for t in turns]
        extra = np.array(rows, dtype=np.float64).reshape(len(turns), 9)
        base = np.stack([sb, _ranks(sb), sd, _ranks(sd)], axis=1) if len(turns) else \
            np.zeros((0, 4))
        return np.concatenate([base[:, :4], extra], axis=1)


class LambdaRank:
    """LambdaRank models trained on sets of conversations, each fitted once (and cached on
    disk outside the repository when ``cache`` is given)."""

    def __init__(self, inputs: StageInputs, cache: Path | None) -> None:
        self.inputs = inputs
        self.cache = cache
        n = len(inputs.data.questions)
        self.X = [inputs.features(qi) for qi in range(n)]
        self.y = [np.array([t in set(q.evidence) for t in inputs.lists[qi].turns.tolist()],
                           dtype=np.float64)
                  for qi, q in enumerate(inputs.data.questions)]
        self._scores: dict[tuple[frozenset[int], int], np.ndarray] = {}
        self.fits = 0

    def _key(self, train: frozenset[int]) -> str:
        text = repr((sorted(train), sorted(LTR_PARAMS.items()), LTR_FEATURES,
                     [self.inputs.data.conversations[c].sample_id for c in sorted(train)],
                     len(self.inputs.data.questions)))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def predictions(self, train: frozenset[int]) -> list[np.ndarray]:
        """Every question's candidate scores by the model trained on ``train``."""
        path = None if self.cache is None else self.cache / f"ltr_{self._key(train)}.npz"
        if path is not None and path.is_file():
            with np.load(path) as held:
                flat, sizes = held["scores"], held["sizes"]
            return np.split(flat, np.cumsum(sizes)[:-1])
        import lightgbm

        qs = [qi for qi, q in enumerate(self.inputs.data.questions)
              if q.conv in train and len(self.y[qi])]
        X = np.concatenate([self.X[qi] for qi in qs])
        y = np.concatenate([self.y[qi] for qi in qs])
        model = lightgbm.LGBMRanker(**LTR_PARAMS)
        model.fit(X, y, group=[len(self.y[qi]) for qi in qs],
                  categorical_feature=[LTR_FEATURES.index("qtype")])
        self.fits += 1
        sizes = np.array([len(x) for x in self.X])
        flat = np.round(model.predict(np.concatenate(self.X)), 9) if sizes.sum() else \
            np.zeros(0)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, scores=flat, sizes=sizes)
        return np.split(flat, np.cumsum(sizes)[:-1])

    def fold_lists(self, fold: int, training: Iterable[int]) -> list[CandidateList]:
        """The candidate lists one fold sees: its held-out conversation scored by the model
        trained on ``training`` (never ``fold``); each training conversation ``g`` scored by
        the model trained on ``training`` without ``g``, so the feedback heaprank learns from
        comes from scores that never saw their own labels."""
        training = frozenset(training) - {fold}
        held = self.predictions(training)
        by_conv = {g: self.predictions(training - {g}) for g in sorted(training)}
        out = []
        for qi, q in enumerate(self.inputs.data.questions):
            scores = held[qi] if q.conv not in by_conv else by_conv[q.conv][qi]
            out.append(self.inputs.ordered(qi, scores))
        return out
