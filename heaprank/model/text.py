"""Unicode word analysis shared by the question and the candidates: tokens, names, and whether a
text mentions a date or a number (English words first; other scripts survive)."""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|"
           "december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_RELATIVE = ("yesterday|today|tomorrow|tonight|weekend|weekends|morning|afternoon|evening|"
             "noon|midnight|ago|week|weeks|month|months|year|years|day|days|recently|lately|"
             "soon|later|earlier|since|until|last|next|birthday|anniversary|summer|winter|"
             "spring|autumn|fall|christmas|holiday|holidays|date|deadline|o'clock")
_DATE = re.compile(
    rf"\b(?:{_MONTHS}|{_DAYS}|{_RELATIVE})\b"
    r"|\b(?:1[89]\d\d|20\d\d)\b"  # years
    r"|\b\d{1,2}[:.]\d{2}\s*(?:am|pm)?\b|\b\d{1,2}\s*(?:am|pm)\b"  # clock times
    r"|\b\d{1,4}[/-]\d{1,2}(?:[/-]\d{1,4})?\b"  # 14/03, 2024-03-14
    r"|\d+\s*[年月日号]",  # CJK dates
    re.IGNORECASE | re.UNICODE,
)
_NUMBER_WORDS = ("zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
                 "fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|"
                 "fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|dozen|"
                 "couple|several|once|twice|first|second|third")
_NUM = re.compile(rf"\d|\b(?:{_NUMBER_WORDS})\b|[$€£¥₹]", re.IGNORECASE | re.UNICODE)
_SENTENCE_END = frozenset(".!?。！？\n")

_STOP = frozenset("""a an the and or but if of to in on at by for with about from into over
after before under again further then once here there when where why how all any both each few
more most other some such no nor not only own same so than too very can will just should now
is are was were be been being have has had do does did i me my we our you your he him his she
her it its they them their what which who whom this that these those am would could might must
shall may s t don isn""".split())

# Capitalised calendar words are dates (the date slot), not names.
_CALENDAR = frozenset(f"{_MONTHS}|{_DAYS}".split("|"))

_AUX_START = frozenset("""is are was were do does did can could will would should shall has have
had may might must am""".split())

def tokens(text: str) -> list[str]:
    """Unicode word tokens, case preserved (accents, Cyrillic and CJK survive)."""
    return _WORD.findall(unicodedata.normalize("NFC", text))


def _is_name(token: str) -> bool:
    first = token[0]
    return first.isupper() and not token.isupper() or (first.isupper() and len(token) > 1
                                                        and token.isupper() and len(token) <= 4)


def names(text: str) -> frozenset[str]:
    """Capitalised words that do not start a sentence, casefolded (proper names, roughly)."""
    out: set[str] = set()
    sentence_start = True
    for match in re.finditer(r"\w+(?:['’]\w+)*|[.!?。！？\n]", unicodedata.normalize("NFC", text)):
        tok = match.group(0)
        if tok in _SENTENCE_END:
            sentence_start = True
            continue
        if not sentence_start and _is_name(tok) and tok.casefold() not in _STOP \
                and tok.casefold() not in _CALENDAR:
            out.add(tok.casefold())
        sentence_start = False
    return frozenset(out)


