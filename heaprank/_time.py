"""Time values: epoch seconds, ``datetime`` (naive means UTC) or ISO 8601 strings."""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone
from typing import Union

from .errors import InputError

TimeLike = Union[float, int, datetime, str]

DAY_S = 86_400.0


def to_epoch(value: object, field: str) -> float:
    """Convert a time value to epoch seconds, raising :class:`InputError` naming ``field``."""
    if isinstance(value, bool):
        raise TypeError(f"{field}: expected epoch seconds, datetime or ISO string, got bool")
    if isinstance(value, (int, float)):
        try:
            out = float(value)
        except OverflowError:  # an int beyond the float range
            raise InputError(f"{field}: time must be finite, got an integer too large for a "
                             f"float") from None
        if not math.isfinite(out):
            raise InputError(f"{field}: time must be finite, got {value!r}")
        return out
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise InputError(f"{field}: cannot parse {value!r} as an ISO 8601 time") from None
        return to_epoch(parsed, field)
    try:  # numpy scalars and other real numbers
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(
            f"{field}: expected epoch seconds, datetime or ISO string, got {type(value).__name__}"
        ) from None
    return to_epoch(out, field)


def resolve_now(now: object | None) -> tuple[float, bool]:
    """``(epoch, explicit)``: the caller's ``now`` if given, else the wall clock."""
    if now is None:
        return time.time(), False
    return to_epoch(now, "now"), True
