"""The explorer's settings: how often a rerank samples usefulness instead of taking its mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import ConfigError
from ._base import Group, check_fraction


@dataclass(frozen=True, slots=True, kw_only=True)
class Exploration(Group):
    """Thompson-sampling exploration of the learned links (``Config.exploration``).

    Args:
        rate: Share of reranks that explore: usefulness comes from a Thompson sample of each
            link's Beta posterior instead of its mean (0: never).
        seed: Seed of the reranker's exploration draws (read when the reranker is built;
            ``None``: fresh entropy).
    """

    GROUP: ClassVar[str] = "exploration"

    rate: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        check_fraction(self._at("rate"), self.rate, closed=True)
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ConfigError(f"{self._at('seed')}: expected None or an int >= 0, got {seed!r}")
