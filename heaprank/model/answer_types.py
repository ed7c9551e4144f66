"""Answer-type slots: what kind of answer a memory holds, never its words.

The coarse slots say a memory mentions a date (``date:yes``) or a number (``num:yes``); a clock
time, a rating, a price and a head count are all ``num:yes``, and a weekday mentioned in passing
is as much a date as an appointment. Question classification has long matched a question's
expected answer type (date, time, money, count, duration, person, place ...) to what a
candidate holds; these slots let the links learn that match from feedback (a ``when`` question
answered by a time with a day, a ``howmany`` one by a count).

Each family is one slot, ``<family>:yes|no``, switched on by ``Config.answer_slots``; the
detectors are regular expressions over English (other scripts get ``no``):

==========  ===============================================================================
``time``    a clock time: ``9:40``, ``7 pm``, ``10.30am``, ``noon``, ``midnight``
``money``   an amount: ``$40``, ``€12.50``, ``300 dollars``, ``5k euros``
``count``   a number of things: ``3 kids``, ``two dogs``, ``a dozen eggs``, ``five times``
``dur``     a duration: ``for 3 years``, ``two weeks``, ``an hour`` (not ``two weeks ago``)
``rate``    a rating or score: ``4 out of 5``, ``8/10``, ``five stars``
``wday``    a weekday: ``Monday``, ``on Fridays``
``place``   a capitalised name after ``in / at / to / from / near / visit``: ``in Lisbon``
==========  ===============================================================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .text import _CALENDAR

#: The answer-type families, in slot order (``Config.answer_slots`` takes any of them).
ANSWER_FAMILIES = ("time", "money", "count", "dur", "rate", "wday", "place")

_NUMBER = (r"(?:\d+(?:[.,]\d+)?|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
           r"twelve|fifteen|twenty|thirty|forty|fifty|hundred|a\s+few|few|several|a\s+couple"
           r"\s+of|couple\s+of|a\s+dozen|dozens\s+of|dozen)")
_UNITS = r"(?:seconds?|minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|months?|years?|decades?)"
_CURRENCY = r"(?:dollars?|bucks|euros?|pounds?|usd|eur|gbp|cents?|yen|rupees?)"
_FLAGS = re.IGNORECASE | re.UNICODE

_DETECTORS: dict[str, re.Pattern[str]] = {
    "time": re.compile(r"\b\d{1,2}[:.]\d{2}\s*(?:[ap]\.?m\.?)?(?!\d)|\b\d{1,2}\s*[ap]\.?m\b\.?"
                       r"|\b(?:noon|midnight|o'clock)\b", _FLAGS),
    "money": re.compile(rf"[$€£¥₹]\s?\d|\b\d[\d,.]*\s*k?\s*{_CURRENCY}\b", _FLAGS),
    "count": re.compile(rf"\b(?:\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|"
                        rf"twelve|twenty|dozen|several|a\s+dozen)\s+(?!(?:{_UNITS}|{_CURRENCY})\b)"
                        r"(?:[a-z]+s|people|children|times|kids|mice|geese|men|women)\b", _FLAGS),
    "dur": re.compile(rf"\b{_NUMBER}\s+{_UNITS}\b(?!\s+(?:ago|earlier|before|later|old)\b)"
                      r"|\bfor\s+(?:a\s+(?:while|long\s+time)|ages|years|months|weeks)\b", _FLAGS),
    "rate": re.compile(r"\b\d+(?:\.\d+)?\s*(?:/|out\s+of)\s*(?:5|10|100)\b"
                       r"|\b(?:\d|one|two|three|four|five)(?:\.\d)?\s*stars?\b", _FLAGS),
    "wday": re.compile(r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b",
                       _FLAGS),
}
_PLACE = re.compile(r"\b(?i:in|at|to|from|near|visit|visited|visiting)\s+(?:the\s+)?"
                    r"([A-Z][\w'’-]+)", re.UNICODE)


def _has_place(text: str) -> bool:
    return any(m.group(1).casefold() not in _CALENDAR for m in _PLACE.finditer(text))


def answer_slots(text: str, families: Sequence[str]) -> tuple[str, ...]:
    """The slots ``<family>:yes|no`` of ``text`` for each of ``families`` (in their order)."""
    out = []
    for family in families:
        found = _has_place(text) if family == "place" else bool(_DETECTORS[family].search(text))
        out.append(f"{family}:{'yes' if found else 'no'}")
    return tuple(out)
