"""The online re-fit's settings: how often, on how much of the log, and what it may move."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import ConfigError
from ._base import Group, check_bool, check_int, check_nonneg
from .weights import SIGNALS


@dataclass(frozen=True, slots=True, kw_only=True)
class Refit(Group):
    """Re-fitting ``Config.weights`` from the impression log as feedback arrives
    (``Config.refit``).

    Args:
        every: Re-fit the weights from the state's impression log after every this many
            feedbacks given through a reranker (``tune``'s fit and held-out check, shrunk
            toward the current weights); the weights live in the state, so every reranker
            sharing it ranks with the latest. 0: never, and the weights stay as given.
        shrinkage: The L2 pull of each re-fit toward the current weights.
        window: A re-fit reads the latest this many impressions with feedback (its cost grows
            with them: ``python -m benchmarks refit-cost``).
        poll_s: How often (seconds) a reranker looks for weights another process fitted.
        signals: The weights a re-fit may move (``None``: every weight the log carries; the
            others stay as configured).
        reject_impressions: With ``learning.reject_discount="fitted"``, the log curve stays
            until a re-fit reads this many impressions with feedback.
        qtypes: Each re-fit also fits each question type's weights (its impressions only,
            pulled toward the pooled fit) into ``Config.qtype_weights``, where its own
            held-out check lets it move.
    """

    GROUP: ClassVar[str] = "refit"

    every: int = 100
    shrinkage: float = 1.0
    window: int = 5000
    poll_s: float = 5.0
    signals: tuple[str, ...] | None = None
    qtypes: bool = False
    reject_impressions: int = 500

    def __post_init__(self) -> None:
        check_int(self._at("every"), self.every, 0)
        check_nonneg(self._at("shrinkage"), self.shrinkage)
        check_int(self._at("window"), self.window, 1)
        check_nonneg(self._at("poll_s"), self.poll_s)
        if self.signals is not None:
            if isinstance(self.signals, str) or not isinstance(self.signals, (tuple, list)) \
                    or any(n not in SIGNALS for n in self.signals):
                raise ConfigError(f"{self._at('signals')}: expected None or signal names of "
                                  f"{', '.join(SIGNALS)}, got {self.signals!r}")
            object.__setattr__(self, "signals", tuple(self.signals))
        check_bool(self._at("qtypes"), self.qtypes)
        check_int(self._at("reject_impressions"), self.reject_impressions, 1)
