"""Which shown documents did an answer use: citations, or an opt-in word-overlap heuristic.

Framework-free, so every adapter (``langchain-heaprank``, ``llama-index-postprocessor-heaprank``,
or your own glue) decides "used" the same way before calling ``Reranker.feedback``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_BRACKET = re.compile(r"\[([^\[\]\n]{1,200})\]")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Shown:
    """One document as the model saw it: its heaprank id, other names it may be cited by, its text."""

    id: str
    aliases: tuple[str, ...]
    text: str


#: ``detector(answer, shown) -> used ids``; ``shown`` is in the order the model saw it.
UsageDetector = Callable[[str, Sequence[Shown]], list[str]]


def cited(answer: str, shown: Sequence[Shown]) -> list[str]:
    """Ids cited in ``answer`` as ``[doc-id]``, ``[a, b]`` or ``[2]`` (1-based position shown).

    A bracket token that names a shown id or alias wins over a position, so a document whose
    id is ``"2"`` is cited by ``[2]`` whatever its position.
    """
    by_name: dict[str, str] = {}
    for item in shown:
        for name in (item.id, *item.aliases):
            by_name.setdefault(name, item.id)
    used: list[str] = []
    for match in _BRACKET.finditer(answer):
        for token in match.group(1).split(","):
            token = token.strip()
            doc_id = by_name.get(token)
            if doc_id is None and token.isdigit() and 1 <= int(token) <= len(shown):
                doc_id = shown[int(token) - 1].id
            if doc_id is not None and doc_id not in used:
                used.append(doc_id)
    return used


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 3}


def overlapping(answer: str, shown: Sequence[Shown], *, threshold: float = 0.5) -> list[str]:
    """Ids whose content words (longer than 3 letters) appear in ``answer`` at least ``threshold``
    of the time: a heuristic for models that do not cite, switched on by the caller."""
    words = _content_words(answer)
    used = []
    for item in shown:
        own = _content_words(item.text)
        if own and len(own & words) / len(own) >= threshold:
            used.append(item.id)
    return used


def citations_or_overlap(threshold: float) -> UsageDetector:
    """Citations when the answer has any, else the overlap heuristic."""

    def detect(answer: str, shown: Sequence[Shown]) -> list[str]:
        return cited(answer, shown) or overlapping(answer, shown, threshold=threshold)

    return detect
