"""Feedback as a real app gives it (issue 34, item 4): simulated answers and citing models.

The LoCoMo harness's ``oracle`` and ``noisy`` modes hand heaprank the evidence ids directly.
These modes make the app's side realistic:

- ``answer``: the model's answer is LoCoMo's gold answer text, with no citation; what it "used"
  is decided by heaprank's own attribution
  (:func:`heaprank.learning.attribution.citations_or_coverage`, threshold 0.5, the question's
  words left out) over the 10 shown texts. An abstention gives no feedback at all. An
  adversarial question (category 5) has no gold answer: the right answer is that the
  conversation does not say, so the model answers :data:`NOT_MENTIONED`;
- ``answer-restated``: the same answer restated around the question by a fixed template
  (:func:`restate`, no model): the question's words after its wh-word and auxiliary, then the
  answer, after a filler opening;
- ``cites``: a model that cites shown ids with position-biased errors: each shown evidence item
  is cited with probability :func:`p_cite` (falling with its position), each shown
  non-evidence item falsely with :func:`p_false` (more likely at the top); seeded per
  (fold, question); citing nothing is feedback that nothing shown was used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from heaprank.learning.attribution import Shown, citations_or_coverage, detect

#: The modes of this module (``oracle`` and ``noisy`` live in :mod:`.runner`).
ANSWER_MODES = ("answer", "answer-restated", "cites")
NOT_MENTIONED = "Not mentioned in the conversation."
ATTRIBUTION_THRESHOLD = 0.5

_LEAD = frozenset("what when where who whom which why how whose".split())
_AUX = frozenset("""did does do is are was were has have had would will can could might should
many much long often old kind type sort of""".split())


def restate(question: str, answer: str) -> str:
    """``answer`` restated around ``question``, deterministically: "When did Caroline go to the
    support group?" + "7 May 2023" -> "As far as I remember, Caroline go to the support group:
    7 May 2023." (wh-word and auxiliaries dropped, the rest kept verbatim)."""
    words = question.strip().rstrip("?").split()
    while words and words[0].lower().strip(",'") in _LEAD | _AUX:
        words = words[1:]
    body = " ".join(words)
    return f"As far as I remember, {body}: {answer}." if body else f"{answer}."


def model_answer(gold: str, question: str, mode: str) -> str:
    """The simulated model's answer of ``mode`` (``answer`` or ``answer-restated``)."""
    text = gold.strip() or NOT_MENTIONED
    return restate(question, text) if mode == "answer-restated" else text


def p_cite(position: int) -> float:
    """``cites``: the probability that a shown evidence item at ``position`` (0-based) is cited:
    0.9 at the top, 0.85 times less per position down (0.21 at the 10th)."""
    return 0.9 * 0.85 ** position


def p_false(position: int) -> float:
    """``cites``: the probability that a shown non-evidence item at ``position`` is cited by
    mistake: 0.08 at the top, 0.7 times less per position down (0.26 false citations per answer
    on 10 shown, most at the top)."""
    return 0.08 * 0.7 ** position


def biased_citations(rng: np.random.Generator, shown: Sequence[str],
                     evidence: frozenset[str]) -> list[str]:
    """The ids a position-biased model cites among ``shown`` (one draw per shown item)."""
    used = []
    for i, doc_id in enumerate(shown):
        p = p_cite(i) if doc_id in evidence else p_false(i)
        if rng.random() < p:
            used.append(doc_id)
    return used


@dataclass(slots=True)
class AttributionTally:
    """How a mode's "used" compared with the evidence, over the answers it simulated."""

    answers: int = 0  # answered questions (a rerank was shown)
    abstained: int = 0  # no feedback: the attribution could not tell
    with_evidence: int = 0  # answers with an evidence item among the shown
    found: int = 0  # ... of which "used" named one
    used: int = 0  # ids reported used
    true_used: int = 0  # ... that are evidence
    evidence_items: int = 0  # evidence items shown

    def add(self, used: list[str] | None, shown: Sequence[str], evidence: frozenset[str]) -> None:
        self.answers += 1
        ev_shown = [d for d in shown if d in evidence]
        self.with_evidence += bool(ev_shown)
        self.evidence_items += len(ev_shown)
        if used is None:
            self.abstained += 1
            return
        hits = sum(d in evidence for d in used)
        self.used += len(used)
        self.true_used += hits
        self.found += bool(ev_shown) and hits > 0

    def summary(self) -> dict[str, float | int]:
        """The counts, and precision / recall against the evidence shown, the share of answers
        attributed (not abstained) and of answers with evidence shown whose evidence was found."""
        out: dict[str, float | int] = {
            "answers": self.answers, "abstained": self.abstained,
            "with_evidence": self.with_evidence, "found": self.found, "used": self.used,
            "true_used": self.true_used, "evidence_items": self.evidence_items}
        out["attributed_share"] = round(1 - self.abstained / max(self.answers, 1), 4)
        out["found_share"] = round(self.found / max(self.with_evidence, 1), 4)
        out["precision"] = round(self.true_used / max(self.used, 1), 4)
        out["recall"] = round(self.true_used / max(self.evidence_items, 1), 4)
        return out

    def merge(self, other: dict[str, float | int]) -> None:
        """Add another tally's :meth:`summary` counts (folds of one run)."""
        for name in ("answers", "abstained", "with_evidence", "found", "used", "true_used",
                     "evidence_items"):
            setattr(self, name, getattr(self, name) + int(other.get(name, 0)))

    @staticmethod
    def into(log: dict[str, dict[str, float | int]], key: str, tally: AttributionTally) -> None:
        """Add ``tally`` to ``log[key]`` (a :meth:`summary`, summed over folds)."""
        total = AttributionTally()
        if key in log:
            total.merge(log[key])
        total.merge(tally.summary())
        log[key] = total.summary()


_DETECTOR = citations_or_coverage(ATTRIBUTION_THRESHOLD)


def simulated_used(mode: str, *, gold: str, question: str, shown: Sequence[Shown],
                   evidence: frozenset[str], rng: np.random.Generator | None
                   ) -> list[str] | None:
    """What the app reports used for one answer of ``mode`` (``None``: it abstained, so no
    feedback is given).

    Raises:
        ValueError: ``mode`` is not one of :data:`ANSWER_MODES`, or ``cites`` without ``rng``.
    """
    if mode == "cites":
        if rng is None:
            raise ValueError("rng: the cites mode draws its citations from a seeded generator")
        return biased_citations(rng, [s.id for s in shown], evidence)
    if mode not in ("answer", "answer-restated"):
        raise ValueError(f"mode: expected one of {ANSWER_MODES}, got {mode!r}")
    return detect(_DETECTOR, model_answer(gold, question, mode), shown, question=question)
