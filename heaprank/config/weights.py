"""The signal weights: exponents of the log-linear score, one field per declared signal."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass
from typing import TYPE_CHECKING, Any

from ..model.signals import NAMES
from ..model.signals import SIGNALS as SIGNAL_DECLARED
from ._base import MAX_WEIGHT, check_weight

#: The signals' names, in the order of the score's columns (declared in heaprank/model/signals.py).
SIGNALS = NAMES


def _check_weights(self: Any) -> None:
    for f in fields(self):
        check_weight(f"weights.{f.name}", getattr(self, f.name))


def _as_tuple(self: Any) -> tuple[float, ...]:
    """The weights in :data:`SIGNALS` order."""
    return tuple(float(getattr(self, name)) for name in SIGNALS)


_WEIGHTS_DOC = ("Exponents of the log-linear score ``prod_i signal_i ** w_i``; 0 switches a "
                f"signal off. Each is a finite number from 0 to {MAX_WEIGHT:g}."
                "\n\nOne field per signal of :data:`heaprank.model.signals.SIGNALS`, "
                "its default there:\n\n" + "\n".join(
                    f"- ``{s.name}`` (default {s.weight:g}): {s.doc}." for s in SIGNAL_DECLARED))

if TYPE_CHECKING:
    @dataclass(frozen=True, init=False)
    class Weights:
        """Exponents of the log-linear score, one keyword per declared signal."""

        def __init__(self, **weights: float) -> None: ...
        def __getattr__(self, name: str) -> float: ...
        def as_tuple(self) -> tuple[float, ...]: ...
else:
    # Built from the declaration (heaprank/model/signals.py), so that a new signal is a weight
    # without an edit here: a frozen, keyword-only dataclass with one float field per signal.
    Weights = make_dataclass(
        "Weights", [(s.name, float, field(default=s.weight)) for s in SIGNAL_DECLARED],
        namespace={"__post_init__": _check_weights, "as_tuple": _as_tuple,
                   "__doc__": _WEIGHTS_DOC, "__module__": "heaprank.config"},
        frozen=True, slots=True, kw_only=True)
