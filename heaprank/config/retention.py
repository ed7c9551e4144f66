"""The usage signals' settings: how a memory ages (recency), is reinforced by use and forgotten."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from .._time import DAY_S
from ..errors import ConfigError
from ..model.retention import PolicySet, RetentionPolicy, parse_policy
from ._base import Group, check_bool, check_choice, check_fraction, check_nonneg, check_positive

RECENCY_KERNELS = ("exponential", "ebbinghaus")


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention(Group):
    """Recency, reinforcement and forgetting (``Config.retention``).

    Args:
        half_life_s: Recency half-life on time since last use (creation until first use).
        recency_floor: Recency never drops below this, in [0, 1).
        recency_kernel: ``"exponential"``: ``2 ** (-age / half_life_s)``; ``"ebbinghaus"``: the
            retention ``exp(-idle_days / S)`` of the namespace's retention policy, ``S``
            lengthened by importance and use count. Both are lifted by ``recency_floor``.
        reinforcement_cap: Use count at which the reinforcement signal stops growing (it is
            ``1 + log2(1 + min(uses, cap)) / log2(1 + cap)``, in [1, 2]).
        policy: The forget policy: ``None`` (built-in defaults), a
            :class:`~heaprank.model.retention.RetentionPolicy` or
            :class:`~heaprank.model.retention.PolicySet` (a mapping in the policy file's form, as
            config files hold it, becomes one), or the path of a TOML or JSON policy file
            (re-read when it changes).
        drop_forgotten: Drop candidates the retention policy counts as forgotten from rankings
            (the ``forgotten`` rule, multiplier 0).
    """

    GROUP: ClassVar[str] = "retention"

    half_life_s: float = 30 * DAY_S
    recency_floor: float = 0.9
    recency_kernel: Literal["exponential", "ebbinghaus"] = "exponential"
    reinforcement_cap: float = 100.0
    policy: str | os.PathLike[str] | PolicySet | RetentionPolicy | None = None
    drop_forgotten: bool = False

    def __post_init__(self) -> None:
        check_positive(self._at("half_life_s"), self.half_life_s)
        check_fraction(self._at("recency_floor"), self.recency_floor, closed=False)
        check_choice(self._at("recency_kernel"), self.recency_kernel, RECENCY_KERNELS)
        check_nonneg(self._at("reinforcement_cap"), self.reinforcement_cap)
        if self.reinforcement_cap < 1:
            raise ConfigError(f"{self._at('reinforcement_cap')}: must be >= 1, got "
                              f"{self.reinforcement_cap!r}")
        policy = self.policy
        if isinstance(policy, Mapping):  # a policy written inline, as to_dict writes it
            policy = parse_policy(policy, self._at("policy"))
            object.__setattr__(self, "policy", policy)
        if not (policy is None or isinstance(policy, (str, os.PathLike, PolicySet,
                                                      RetentionPolicy))):
            raise ConfigError(f"{self._at('policy')}: expected a file path, a RetentionPolicy "
                              f"or a PolicySet, got {type(policy).__name__}")
        check_bool(self._at("drop_forgotten"), self.drop_forgotten)
