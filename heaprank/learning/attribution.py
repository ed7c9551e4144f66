"""Which shown documents did an answer use: citations, answer coverage, or the app's embeddings.

Framework-free, so every adapter (``langchain-heaprank``, ``llama-index-postprocessor-heaprank``,
or your own glue) decides "used" the same way before calling ``Reranker.feedback``.

A detector returns the used ids, or ``None`` when it *abstains*: it cannot tell what the answer
used (no citation, and no shown text covers enough of the answer). An abstention is not "nothing
was used": the caller records no feedback for that answer at all, so an answer that merely did
not cite never teaches heaprank that every shown document was ignored.

- :func:`cited`: ``[doc-id]``, ``[a, b]`` or ``[2]`` in the answer (never abstains: ``[]`` is
  "cited nothing");
- :func:`covered`: the shown texts that hold the largest share of the *answer's* content words
  and numbers (at least ``threshold``, default 0.5), optionally without the question's own words;
  abstains below the bar;
- :func:`similar`: the shown texts most similar to the answer by the app's own embedding
  function, above a bar; abstains below it;
- :func:`citations_or_coverage`: the default, citations first, then coverage, then abstain;
- :func:`overlapping` / :func:`citations_or_overlap`: the older opt-in heuristic (share of a
  *document's* words found in the answer), kept for callers that chose it.

:func:`detect` calls any detector, passing the question to those that take one.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

_BRACKET = re.compile(r"\[([^\[\]\n]{1,200})\]")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

#: Longer English function words that say nothing about content (3 letters or fewer are
#: dropped anyway, unless they hold a digit).
_FUNCTION_WORDS = frozenset("""
about above after again against also although among another because been before being below
between both could does doing down during each either even every from further have having here
herself himself into itself just least like more most much must neither never only other ours
ourselves over same shall should since some still such than that their theirs them themselves
then there these they this those though through thus under until upon very were what whatever
when where whether which while whom whose with within without would your yours yourself
yourselves""".split())


@dataclass(frozen=True, slots=True)
class Shown:
    """One document as the model saw it: its heaprank id, other names it may be cited by, its text."""

    id: str
    aliases: tuple[str, ...]
    text: str


#: ``detector(answer, shown) -> used ids``, or ``None`` to abstain (record no feedback);
#: ``shown`` is in the order the model saw it. A detector may also take ``question=`` (keyword).
UsageDetector = Callable[[str, Sequence[Shown]], "list[str] | None"]
#: The app's embedding function: ``embed(texts) -> (len(texts), dim)`` array.
Embed = Callable[[list[str]], np.ndarray]


class QuestionAwareDetector(Protocol):
    """A detector that also reads the question the ranking answered (see :func:`detect`)."""

    def __call__(self, answer: str, shown: Sequence[Shown], *,
                 question: str = "") -> list[str] | None: ...


def detect(detector: UsageDetector | QuestionAwareDetector, answer: str, shown: Sequence[Shown],
           question: str = "") -> list[str] | None:
    """``detector(answer, shown)``, with ``question=question`` when the detector takes that
    keyword (the built-in coverage detectors do); ``None`` means it abstained."""
    if question and _takes_question(detector):
        return detector(answer, shown, question=question)  # type: ignore[call-arg]
    return detector(answer, shown)


def _takes_question(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or C callable: call it plainly
        return False
    return "question" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


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


def content_terms(text: str) -> set[str]:
    """The words and numbers of ``text`` that carry content: every token holding a digit, and
    words longer than 3 letters that are not function words, lowercased, a plural ``-s`` off."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if any(ch.isdigit() for ch in word):
            out.add(word)
        elif len(word) > 3 and word not in _FUNCTION_WORDS:
            out.add(word[:-1] if len(word) > 4 and word[-1] == "s" and word[-2] != "s" else word)
    return out


def _check_threshold(threshold: float, name: str = "threshold") -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(f"{name}: expected a number in (0, 1], got {type(threshold).__name__}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"{name}: expected a number in (0, 1], got {threshold!r}")
    return float(threshold)


def coverage(answer: str, shown: Sequence[Shown], *, question: str = "") -> list[float]:
    """For each shown text, the share of the answer's content terms (:func:`content_terms`) it
    holds; the question's own terms are left out of the answer first when ``question`` is given
    (an answer that restates the question should not be credited for its words). All 0.0 when
    the answer has no content term of its own."""
    terms = content_terms(answer) - content_terms(question)
    if not terms:
        return [0.0] * len(shown)
    return [len(terms & content_terms(item.text)) / len(terms) for item in shown]


def covered(answer: str, shown: Sequence[Shown], *, question: str = "",
            threshold: float = 0.5) -> list[str] | None:
    """The shown texts that cover the answer best: the ids whose :func:`coverage` is the
    highest (ties all kept, in shown order) if it is at least ``threshold``; ``None`` (abstain)
    when no shown text reaches it or the answer has no content term of its own.

    Raises:
        ValueError / TypeError: ``threshold`` outside (0, 1] or not a number.
    """
    bar = _check_threshold(threshold)
    shares = coverage(answer, shown, question=question)
    best = max(shares, default=0.0)
    if best <= 0.0 or best < bar:
        return None
    return [item.id for item, share in zip(shown, shares) if share == best]


def citations_or_coverage(threshold: float = 0.5) -> QuestionAwareDetector:
    """The default detector: the ids the answer cites if it cites any, else :func:`covered`
    (with the question's words left out when :func:`detect` passes it), else abstain."""
    bar = _check_threshold(threshold)

    def citations_or_coverage(answer: str, shown: Sequence[Shown], *,
                              question: str = "") -> list[str] | None:
        return cited(answer, shown) or covered(answer, shown, question=question, threshold=bar)

    return citations_or_coverage


def similar(embed: Embed, *, threshold: float = 0.5, margin: float = 0.0) -> UsageDetector:
    """A detector from the app's own embedding function: the shown texts whose cosine
    similarity to the answer is at least ``threshold`` and within ``margin`` of the best one;
    ``None`` (abstain) when none reaches ``threshold``. The bar depends on the embedding model:
    choose it on the app's own answers.

    Raises:
        TypeError: ``embed`` is not callable; ``threshold`` or ``margin`` not a number.
        ValueError: ``threshold`` outside (0, 1], ``margin`` negative; at call time, ``embed``
            returned no ``(len(texts), dim)`` array of finite numbers.
    """
    if not callable(embed):
        raise TypeError(f"embed: expected a callable texts -> array, got {type(embed).__name__}")
    bar = _check_threshold(threshold)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 0.0:
        raise (TypeError if not isinstance(margin, (int, float)) else ValueError)(
            f"margin: expected a number >= 0, got {margin!r}")

    def similar(answer: str, shown: Sequence[Shown]) -> list[str] | None:
        if not answer.strip() or not shown:
            return None
        cos = _cosines(embed, [answer, *(item.text for item in shown)])
        best = float(cos.max())
        if best < bar:
            return None
        return [item.id for item, c in zip(shown, cos.tolist()) if c >= best - margin - 1e-12]

    return similar


def _cosines(embed: Embed, texts: list[str]) -> np.ndarray:
    """Cosine of ``texts[0]`` with each other text, by ``embed``."""
    vecs = np.asarray(embed(texts), dtype=np.float64)
    if vecs.ndim != 2 or vecs.shape[0] != len(texts) or not np.isfinite(vecs).all():
        raise ValueError(f"embed: expected a finite ({len(texts)}, dim) array for {len(texts)} "
                         f"texts, got shape {vecs.shape}")
    norms = np.linalg.norm(vecs, axis=1)
    norms[norms == 0.0] = math.inf  # an empty vector is similar to nothing
    unit = vecs / norms[:, None]
    out: np.ndarray = unit[1:] @ unit[0]
    return out


def overlapping(answer: str, shown: Sequence[Shown], *, threshold: float = 0.5) -> list[str]:
    """Ids whose content words (longer than 3 letters) appear in ``answer`` at least ``threshold``
    of the time: the older heuristic for models that do not cite, switched on by the caller.
    It reads the *document's* words, so a long document is rarely found; :func:`covered`
    reads the answer's."""
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


#: The named ways the framework adapters decide "used" (``"explicit"``: the app says).
Usage = Literal["citations+coverage", "citations", "coverage", "overlap", "citations+overlap",
                "explicit"]
#: The adapters' default: citations, else the answer's coverage by a shown text, else abstain.
DEFAULT_USAGE: Usage = "citations+coverage"


Detector = UsageDetector | QuestionAwareDetector


def usage_detector(usage: Usage | Detector, threshold: float) -> tuple[Detector | None, str]:
    """The detector of ``usage`` and its name (``None`` for ``"explicit"``: the app says).
    ``threshold`` is the bar of the word heuristics: the share of the answer's content terms a
    shown text must hold (``"coverage"``, ``"citations+coverage"``), or of a document's words
    the answer must hold (``"overlap"``, ``"citations+overlap"``).

    Raises:
        ValueError: an unknown name; TypeError / ValueError: ``threshold`` outside (0, 1] (named
            ``overlap_threshold``, the adapters' keyword).
    """
    if callable(usage):
        return usage, getattr(usage, "__name__", "custom")
    if usage != "explicit":
        threshold = _check_threshold(threshold, "overlap_threshold")
    named: dict[str, Detector | None] = {
        "citations+coverage": citations_or_coverage(threshold),
        "citations": cited,
        "coverage": functools.partial(covered, threshold=threshold),
        "overlap": lambda answer, shown: overlapping(answer, shown, threshold=threshold),
        "citations+overlap": citations_or_overlap(threshold),
        "explicit": None,
    }
    if usage not in named:
        raise ValueError(f"usage: expected one of {sorted(named)} or a callable, got {usage!r}")
    return named[usage], usage
