"""Time values: epoch seconds, ``datetime`` (naive means UTC) or ISO 8601 strings.

Two rules for every time heaprank reads. First (``now``, a candidate's ``created_at`` and
``last_used``): it must be a plausible epoch in seconds, between :data:`EARLIEST_S`
(1900-01-01T00:00:00Z) and :data:`LATEST_S` (2200-01-01T00:00:00Z). Anything outside is an
error naming the field, with a hint when the value is plausible in milliseconds or
microseconds. A single implausible time (``now=4e12``) would otherwise be stored as a
document's last use and pin its recency forever.

Second, where a stored time meets ``now``: a stored time after ``now`` counts as ``now`` (an age
is never negative), and a feedback's time must lie near its impression's
(:func:`feedback_time_ok`), so one skewed clock cannot date a document's last use years ahead.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone
from typing import Union

import numpy as np

from ._checks import preview
from .errors import InputError, InputTypeError

TimeLike = Union[float, int, datetime, str]

DAY_S = 86_400.0

#: Earliest plausible time, 1900-01-01T00:00:00Z, in epoch seconds.
EARLIEST_S = -2_208_988_800.0
#: Latest plausible time, 2200-01-01T00:00:00Z, in epoch seconds.
LATEST_S = 7_258_118_400.0

#: How long after its rerank a feedback may come (its impression expires well before that).
FEEDBACK_LATE_S = 366 * DAY_S
#: How long before its rerank a feedback's time may lie: the clock skew tolerated between
#: the process that ranked and the one that reports (as for candidates' times).
FEEDBACK_EARLY_S = 300.0

#: The number types read as epoch seconds (``bool`` is excluded explicitly).
NUMBER_TYPES = (int, float, np.integer, np.floating)


def check_epoch(value: float, field: str) -> float:
    """``value`` if it lies in [:data:`EARLIEST_S`, :data:`LATEST_S`], else :class:`InputError`.

    ``value`` must already be a finite float.
    """
    if EARLIEST_S <= value <= LATEST_S:
        return value
    hint = ""
    for unit, scale in (("milliseconds", 1e3), ("microseconds", 1e6), ("nanoseconds", 1e9)):
        if EARLIEST_S <= value / scale <= LATEST_S:
            hint = f"; it looks like {unit}: divide by {scale:g}"
            break
    raise InputError(f"{field}: {value!r} is not a plausible time in epoch seconds (expected "
                     f"1900-01-01 to 2200-01-01, {EARLIEST_S:.0f} to {LATEST_S:.0f}){hint}")


def parse_time(value: object, field: str) -> float:
    """Epoch seconds of a number, ``datetime`` or ISO 8601 string, not yet range-checked.

    Raises:
        InputTypeError: not a number, ``datetime`` or ``str`` (``bool`` included).
        InputError: non-finite, too large for a float, or an unparsable string.
    """
    if isinstance(value, (bool, np.bool_)):
        raise InputTypeError(f"{field}: expected epoch seconds, datetime or ISO string, got bool")
    if isinstance(value, NUMBER_TYPES):
        try:
            out = float(value)
        except OverflowError:  # an int beyond the float range
            raise InputError(f"{field}: time must be finite, got an integer too large for a "
                             f"float") from None
        if not math.isfinite(out):
            raise InputError(f"{field}: time must be finite, got {out!r}")
        return out
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise InputError(f"{field}: cannot parse {preview(value)} as an ISO 8601 time") from None
        return parse_time(parsed, field)
    raise InputTypeError(
        f"{field}: expected epoch seconds, datetime or ISO string, got {type(value).__name__}")


def to_epoch(value: object, field: str) -> float:
    """Convert a time value to plausible epoch seconds, the error naming ``field``.

    Raises:
        InputTypeError: a value of the wrong type.
        InputError: unparsable, non-finite, or outside 1900-2200 (see :func:`check_epoch`).
    """
    if type(value) is float and EARLIEST_S <= value <= LATEST_S:
        return value  # the usual case on every call: what the checks below return for it
    return check_epoch(parse_time(value, field), field)


def resolve_now(now: object | None) -> tuple[float, bool]:
    """``(epoch, explicit)``: the caller's ``now`` if given (checked by :func:`to_epoch`), else
    the wall clock."""
    if now is None:
        return time.time(), False
    return to_epoch(now, "now"), True


def feedback_time_ok(when: float, shown_at: float) -> bool:
    """Whether a feedback at ``when`` may apply to an impression shown at ``shown_at``: from
    :data:`FEEDBACK_EARLY_S` before it to :data:`FEEDBACK_LATE_S` after it."""
    return shown_at - FEEDBACK_EARLY_S <= when <= shown_at + FEEDBACK_LATE_S
