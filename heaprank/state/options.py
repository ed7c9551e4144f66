"""One option of a state URL's query string, as the state's keyword argument."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError


def option_argument(name: str, value: str, kind: type,
                    renamed: Mapping[str, str]) -> tuple[str, Any]:
    """The keyword and value of URL option ``name=value`` of type ``kind``: ``mode`` (``ro``,
    ``rw`` or ``rwc``) becomes ``read_only``, a name in ``renamed`` its keyword (``timeout`` ->
    ``timeout_s``); a value ``kind`` refuses is a ConfigError naming the option."""
    try:
        parsed = kind(value)
    except ValueError:
        raise ConfigError(f"state: option {name}={value!r} is not a valid "
                          f"{kind.__name__}") from None
    if name == "mode":
        if parsed not in ("ro", "rw", "rwc"):
            raise ConfigError(f"state: mode={value!r}; expected ro, rw or rwc")
        return "read_only", parsed == "ro"
    return renamed.get(name, name), parsed
