"""What heaprank reads from a question: its type, the names it mentions, whose statements it
asks about (its grammatical person) and what it wants of time (its temporal intent).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from .._accel.tables import word_bloom
from ..errors import ConfigError
from .text import _AUX_START, _STOP, names, tokens

QUESTION_TYPES = ("when", "who", "where", "howmany", "howmuch", "what", "why", "how", "yesno",
                  "other")


def english_question_type(query: str) -> str:
    """Classify a question by its first interrogative (English rules; ``other`` otherwise)."""
    words = [w.casefold() for w in tokens(query)]
    if not words:
        return "other"
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if word == "how":
            if nxt == "many":
                return "howmany"
            if nxt in ("much", "expensive"):
                return "howmuch"
            if nxt in ("long", "old", "often", "soon"):
                return "when"
            return "how"
        if word == "when" or (word == "what" and nxt in ("time", "date", "day", "year", "month")):
            return "when"
        if word in ("who", "whom", "whose"):
            return "who"
        if word == "where":
            return "where"
        if word == "why":
            return "why"
        if word in ("what", "which"):
            return "what"
    if words[0] in _AUX_START:
        return "yesno"
    return "other"


QuestionClassifier = Callable[[str], str]
_QTYPE_CODE = {q: i for i, q in enumerate(QUESTION_TYPES)}

# --------------------------------------------------------------- whose statements

PERSONS = ("first", "second", "third")
ROLES = ("user", "assistant", "other")
_FIRST_PERSON = frozenset("i me my mine myself we us our ours ourselves i'm i've i'd i'll "
                          "we're we've".split())
_SECOND_PERSON = frozenset("you your yours yourself yourselves you're you've you'd "
                           "you'll".split())
_MODALS = frozenset("can could would will".split())
# "Can you remind me ...": a request addressed to the assistant, not a question about what
# the assistant said; its "you" does not make the question second person.
_REQUEST_VERBS = frozenset("""remind tell show help give find list check look recall repeat
summarise summarize pull get say please""".split())
_USER_ROLES = frozenset("user human me customer client patient".split())
_ASSISTANT_ROLES = frozenset("assistant ai bot agent model chatbot".split())


def question_person(query: str) -> str:
    """Whose statements a question asks about, read from its grammatical person (English).

    ``second`` when it addresses the assistant's own words ("what did you recommend?"),
    ``first`` when it asks about the user's ("what is my dentist's name?"), else ``third``.
    A polite request ("can you remind me ...") is not second person: its "you" is the one
    being asked, and the question is about the rest.
    """
    words = [w.casefold().replace("’", "'") for w in tokens(query)]
    second = first = False
    for i, word in enumerate(words):
        if word in _SECOND_PERSON:
            before = words[i - 1] if i else ""
            after = words[i + 1] if i + 1 < len(words) else ""
            if before in _MODALS and after in _REQUEST_VERBS:
                continue
            second = True
        elif word in _FIRST_PERSON:
            first = True
    if second:
        return "second"
    return "first" if first else "third"


def speaker_role(source: str | None) -> str:
    """The conversational role of a candidate's source: ``user``, ``assistant`` or ``other``
    (a named speaker, a tool, the system, or none)."""
    if not source:
        return "other"
    key = source.strip().casefold()
    if key in _USER_ROLES:
        return "user"
    if key in _ASSISTANT_ROLES:
        return "assistant"
    return "other"


def person_slot(person: str, source: str | None) -> str:
    return f"person:{person}/{speaker_role(source)}"


# --------------------------------------------------------------- temporal intent

INTENTS = ("recent", "past", "none")
# Named periods: "last summer" is a past time, while "the last time" or "her last job" asks
# for the most recent one.
_PERIODS = ("week|month|year|summer|winter|spring|autumn|fall|weekend|night|semester|"
            "season|christmas|birthday|holiday|holidays|vacation|trip")
_RECENT = re.compile(
    r"\b(?:latest|newest|current|currently|now|nowadays|still|anymore|these\s+days|"
    r"at\s+the\s+moment|right\s+now|most\s+recent(?:ly)?|up\s+to\s+date|so\s+far|"
    r"(?:the|my|your|his|her|their|our)\s+last\s+(?!" + _PERIODS + r")\w+|last\s+time|"
    r"(?:did|has|have|was|were)\s+\w+\s+last)\b",
    re.IGNORECASE | re.UNICODE)
_PAST = re.compile(
    r"\b(?:(?:in|during|since|back\s+in|around)\s+(?:1[89]\d\d|20\d\d)|"
    r"(?:last|previous|past)\s+(?:" + _PERIODS + r")s?|"
    r"ago|"
    r"used\s+to|originally|previously|formerly|at\s+first|at\s+the\s+(?:start|beginning)|"
    r"(?:the\s+)?first\s+time|back\s+then|before\s+(?:he|she|they|i|we|you)\b|"
    r"in\s+(?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december))\b",
    re.IGNORECASE | re.UNICODE)


def temporal_intent(query: str) -> str:
    """What a question wants of time (English rules).

    ``recent``: it asks for the current state ("latest", "current", "now", "still", "the last
    time"); ``past``: it names a time before now ("in 2019", "last summer", "two years ago",
    "used to", "at first"); ``none`` otherwise. A question with both ("what does she do now,
    and in 2019?") is ``none``: it asks across time. The intent scales the recency weight by
    ``Config.scoring.intent_recency``, whose values are tuned, not set per word.
    """
    text = unicodedata.normalize("NFC", query).replace("’", "'")
    recent, past = bool(_RECENT.search(text)), bool(_PAST.search(text))
    if recent == past:
        return "none"
    return "recent" if recent else "past"


@dataclass(frozen=True, slots=True)
class QueryInfo:
    """What heaprank reads from a query: its type, its names, whether any content word is left,
    its grammatical person and its temporal intent."""

    text: str
    qtype: str
    names: frozenset[str]
    words: frozenset[str]  # casefolded tokens, for matching a candidate's source
    has_content: bool
    person: str = "third"
    intent: str = "none"
    #: ``(word_bloom(names), word_bloom(words))`` when worked out with them (the query cache
    #: keeps them, so a rerank of a cached query does not hash its words again); None: work
    #: them out from ``names`` and ``words``.
    blooms: tuple[int, int] | None = field(default=None, repr=False, compare=False)



def analyze_query(query: str, classify: QuestionClassifier = english_question_type) -> QueryInfo:
    qtype = classify(query)
    if qtype not in QUESTION_TYPES:
        raise ConfigError(f"question classifier returned {qtype!r}; expected one of "
                         f"{', '.join(QUESTION_TYPES)}")
    words = frozenset(t.casefold() for t in tokens(query))
    # Only names that do not start a sentence: a question's first word is usually a verb
    # ("Tell", "Когда") and counting it would mark unrelated candidates as sharing a name.
    named = names(query)
    return QueryInfo(text=query, qtype=qtype, names=named, words=words,
                     has_content=bool(words - _STOP), person=question_person(query),
                     intent=temporal_intent(query), blooms=(word_bloom(named), word_bloom(words)))

