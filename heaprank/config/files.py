"""Config files: JSON (what :func:`save_config` writes) or TOML, in the grouped shape."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ConfigError
from .core import Config


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read a config file: JSON (what :func:`save_config` writes) or, on Python 3.11+, TOML
    (by the ``.toml`` suffix). Fields left out keep their defaults; a file in the flat shape
    of 0.1 still reads, with a :class:`DeprecationWarning` (:meth:`Config.from_dict`).

    Raises:
        ConfigError: the file cannot be read or parsed, or a field is unknown or invalid (the
            message names the file and the field).
    """
    where = os.fspath(path)
    try:
        text = Path(where).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"config file {where!r}: cannot read it: {reason}") from None
    if where.endswith(".toml"):
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise ConfigError(f"config file {where!r}: TOML needs Python 3.11+; use JSON") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {where!r}: not valid TOML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config file {where!r}: not valid JSON: {exc.msg} at line "
                              f"{exc.lineno} column {exc.colno}") from None
    try:
        return Config.from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"config file {where!r}: {exc}") from None


def save_config(config: Config, path: str | os.PathLike[str]) -> None:
    """Write ``config`` as JSON that :func:`load_config` reads back equal; the file is replaced
    whole (written beside it, then renamed), so a reader never sees half a config."""
    if not isinstance(config, Config):
        raise ConfigError(f"config: expected Config, got {type(config).__name__}")
    where = Path(os.fspath(path))
    partial = where.with_name(f".{where.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(config.to_dict(), indent=2, ensure_ascii=False) + "\n",
                       encoding="utf-8")
    os.replace(partial, where)
