"""A ``postgresql://`` URL: heaprank's options taken out, the rest left to libpq."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...errors import ConfigError
from ..options import option_argument

#: URL query options that are PostgresState's (the rest go to libpq), with their types.
_OPTIONS: dict[str, type] = {"schema": str, "mode": str, "pool_size": int, "timeout": float,
                             "max_impressions": int, "impression_ttl": float,
                             "max_open_impressions": int}
_OPTION_ARGS = {"timeout": "timeout_s", "impression_ttl": "impression_ttl_s"}


def postgres_options(url: str) -> tuple[str, dict[str, Any]]:
    """The libpq URL (heaprank's options taken out) and :class:`PostgresState`'s keyword
    options of a ``postgresql://`` (or ``postgres://``) URL."""
    parts = urlsplit(url)
    options: dict[str, Any] = {}
    rest = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "rls":
            raise ConfigError("state: rls= is an option of 'heaprank state migrate' (row-level "
                              "security is the schema's; a state follows it): drop it here")
        kind = _OPTIONS.get(name)
        if kind is None:
            rest.append((name, value))
            continue
        keyword, parsed = option_argument(name, value, kind, _OPTION_ARGS)
        options[keyword] = parsed
    return urlunsplit(parts._replace(query=urlencode(rest))), options


def check_arguments(url: object, *, counts: Mapping[str, object],
                    spans: Mapping[str, object]) -> None:
    """``ValueError`` naming the first argument of :class:`PostgresState` out of its range:
    ``counts`` must be ints >= 1, ``spans`` numbers > 0, ``url`` a PostgreSQL URL."""
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: must be an int >= 1")
    for name, number in spans.items():
        if not (isinstance(number, (int, float)) and math.isfinite(number) and number > 0):
            raise ValueError(f"{name}: must be > 0")
    if not isinstance(url, str) or url.split(":", 1)[0] not in ("postgresql", "postgres"):
        raise ValueError("url: expected postgresql://user@host:port/dbname")
