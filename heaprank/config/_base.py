"""What every settings group shares: the value checks (each error names ``group.field``) and
the read-only mappings a group holds, which pickle as plain dicts."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import Any, ClassVar

from ..errors import ConfigError

#: Largest signal weight (an exponent) or fusion weight accepted, and largest magnitude of an
#: ``intent_recency`` multiplier: at 100 a signal of 0.99 already weighs 0.37, and far larger
#: exponents push every score to 0.0 (ties) or overflow the log score. Fitted weights stay
#: far below (a re-fit caps them at 20).
MAX_WEIGHT = 100.0


def number(name: str, value: object, rule: str) -> float:
    """``value`` as a finite float, else the ConfigError naming ``name`` and its ``rule``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}: expected a number, got {type(value).__name__}")
    try:
        out = float(value)
    except OverflowError:  # an int beyond the float range
        raise ConfigError(f"{name}: {rule}, got an integer too large for a float") from None
    if not math.isfinite(out):
        raise ConfigError(f"{name}: {rule}, got {value!r}")
    return out


def check_nonneg(name: str, value: object) -> None:
    """A finite number >= 0."""
    if number(name, value, "must be finite and >= 0") < 0:
        raise ConfigError(f"{name}: must be finite and >= 0, got {value!r}")


def check_positive(name: str, value: object) -> None:
    """A finite number > 0."""
    check_nonneg(name, value)
    if value == 0:
        raise ConfigError(f"{name}: must be > 0")


def check_fraction(name: str, value: object, *, closed: bool) -> None:
    """A finite number in [0, 1] (``closed``) or [0, 1)."""
    check_nonneg(name, value)
    if closed and float(value) > 1.0:  # type: ignore[arg-type]
        raise ConfigError(f"{name}: must be in [0, 1], got {value!r}")
    if not closed and float(value) >= 1.0:  # type: ignore[arg-type]
        raise ConfigError(f"{name}: must be in [0, 1), got {value!r}")


def check_weight(name: str, value: object, *, signed: bool = False) -> None:
    """A weight: finite, from 0 (``-MAX_WEIGHT`` when ``signed``) to :data:`MAX_WEIGHT`."""
    rule = f"must be finite and in [-{MAX_WEIGHT:g}, {MAX_WEIGHT:g}]" if signed \
        else "must be finite and >= 0"
    out = number(name, value, rule)
    if out < (-MAX_WEIGHT if signed else 0.0):
        raise ConfigError(f"{name}: {rule}, got {value!r}")
    if out > MAX_WEIGHT:
        raise ConfigError(f"{name}: must be at most {MAX_WEIGHT:g}, got {value!r}")


def check_bool(name: str, value: object) -> None:
    """``True`` or ``False``, nothing that merely tests as one."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name}: expected a bool, got {type(value).__name__}")


def check_int(name: str, value: object, low: int) -> None:
    """An int (not a bool) >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}: expected an int >= {low}, got {value!r}")


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """One of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{name}: expected {' or '.join(map(repr, choices))}, got {value!r}")


def check_mapping(name: str, value: object) -> None:
    """A mapping (a dict, a read-only view, ...)."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a mapping, got {type(value).__name__}")


class Group:
    """Base of the settings groups (and :class:`~heaprank.config.Config`): the fields named in
    ``_MAPPINGS`` are frozen to read-only views, and pickle as plain dicts (a class holding
    some sets ``__getstate__ = Group.getstate`` and ``__setstate__ = Group.setstate`` in its
    body, where the slotted dataclass does not replace them)."""

    __slots__ = ()
    #: The group's name in :class:`Config` and in error messages (``"refit"``).
    GROUP: ClassVar[str] = ""
    _MAPPINGS: ClassVar[tuple[str, ...]] = ()

    def _at(self, name: str) -> str:
        return f"{self.GROUP}.{name}" if self.GROUP else name

    def _freeze(self) -> None:
        for name in self._MAPPINGS:
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def getstate(self) -> list[Any]:
        """The fields' values, read-only mappings as plain dicts (for pickle)."""
        # A read-only mapping does not pickle: send a plain dict, freeze it again on arrival.
        return [dict(v) if isinstance(v, MappingProxyType) else v
                for v in (getattr(self, f.name) for f in fields(self))]  # type: ignore[arg-type]

    def setstate(self, state: list[Any]) -> None:
        """The inverse of :meth:`getstate`."""
        for f, value in zip(fields(self), state):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, value)
        self._freeze()
