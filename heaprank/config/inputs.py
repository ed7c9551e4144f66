"""The candidate reader's settings: what a bad or skewed candidate field does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from ._base import Group, check_choice, check_nonneg


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs(Group):
    """How candidates (and the items of feedback) are read (``Config.inputs``).

    Args:
        on_invalid: ``"raise"`` on bad candidate fields, or ``"neutral"``: neutral signal, flagged.
        future_tolerance_s: Times up to this far in the future count as now (clock skew).
    """

    GROUP: ClassVar[str] = "inputs"

    on_invalid: Literal["raise", "neutral"] = "raise"
    future_tolerance_s: float = 300.0

    def __post_init__(self) -> None:
        check_choice(self._at("on_invalid"), self.on_invalid, ("raise", "neutral"))
        check_nonneg(self._at("future_tolerance_s"), self.future_tolerance_s)
