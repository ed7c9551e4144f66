"""The featuriser's settings: which slots a candidate's features hold, and how much text."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from ..errors import ConfigError
from ..model.answer_types import ANSWER_FAMILIES
from ._base import Group, check_bool, check_int


@dataclass(frozen=True, slots=True, kw_only=True)
class Features(Group):
    """What a candidate's features hold, the keys its learned links are counted under
    (``Config.features``).

    Args:
        doc_features: Add ``doc:<id>`` to every candidate's features.
        tag_slots: Tags that become ``tag:<name>=yes|no`` slots.
        speaker_roles: Add the ``person:<first|second>/<user|assistant|other>`` slot to the
            candidates of a first- or second-person question: the question's grammatical
            person crossed with the candidate's source role, so links learn which questions
            ask about the user's and which about the assistant's own statements. On by
            default: it gains +0.227 MRR on role questions and moves no LoCoMo first stage.
        stage_slots: Add the ``rank:`` and ``gap:`` slots: the candidate's rank in the
            retriever's order and its score gap to the retriever's top, so links learn how
            often the first stage's choice is right for which questions. Off by default: on
            LoCoMo's development split they gain on a learned ranker (LambdaRank, +0.023 MRR
            after feedback) and cost on BM25, fusion and RRF (-0.014 to -0.040), since
            usefulness then holds the first stage's top in place (RESULTS.md).
        prefix_chars: Only this many leading characters of a text are featurised, so a
            candidate's cost does not grow with its size (the length bucket tops out far
            below it).
        answer_slots: Answer-type slot families, each a ``<family>:yes|no`` slot: ``time``,
            ``money``, ``count``, ``dur``, ``rate``, ``wday``, ``place``
            (:mod:`heaprank.model.answer_types`), so links learn which kind of answer a
            question type takes. Off by default (RESULTS.md, "Answer-type slots").
    """

    GROUP: ClassVar[str] = "features"

    doc_features: bool = False
    tag_slots: tuple[str, ...] = ()
    speaker_roles: bool = True
    stage_slots: bool = False
    prefix_chars: int = 2000
    answer_slots: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_bool(self._at("doc_features"), self.doc_features)
        if isinstance(self.tag_slots, str) or not isinstance(self.tag_slots, Iterable) \
                or not all(isinstance(t, str) for t in self.tag_slots):
            raise ConfigError(f"{self._at('tag_slots')}: expected a tuple of tag names")
        object.__setattr__(self, "tag_slots", tuple(self.tag_slots))
        check_bool(self._at("speaker_roles"), self.speaker_roles)
        check_bool(self._at("stage_slots"), self.stage_slots)
        check_int(self._at("prefix_chars"), self.prefix_chars, 100)
        answers = self.answer_slots
        if isinstance(answers, str) or not isinstance(answers, Iterable) \
                or not all(isinstance(a, str) and a in ANSWER_FAMILIES for a in answers):
            raise ConfigError(f"{self._at('answer_slots')}: expected a tuple of families "
                              f"among {', '.join(ANSWER_FAMILIES)}, got {answers!r}")
        if len(set(answers)) != len(tuple(answers)):
            raise ConfigError(f"{self._at('answer_slots')}: a family is named twice")
        object.__setattr__(self, "answer_slots", tuple(answers))
