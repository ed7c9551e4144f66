"""The feedback learner's settings: the links' prior, how credit and blame are split, co-use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..errors import ConfigError
from ..model.co_use import CoUse
from ..model.links import Prior
from ..model.privacy import DEFAULT_MIN_NAMESPACES, check_min_namespaces
from ._base import Group, check_bool, check_choice


@dataclass(frozen=True, slots=True, kw_only=True)
class Learning(Group):
    """How feedback becomes link evidence, and how that evidence is read (``Config.learning``).

    Args:
        prior: Beta prior of every link and how much a namespace borrows from the pool.
        em_credit: EM credit ``p_f / U`` for used items (else uniform ``1 / n_features``).
        reject_discount: An ignored item at rank r adds 1 (``"none"``), ``1 / log2(1 + r)``
            (``"log"``) or rank r's odds of being examined vs rank 1, fitted on the log at each
            re-fit (``"fitted"``; below ``refit.reject_impressions`` the log curve stays).
        co_use: Learn co-use edges between documents used together, and spread activation
            along them when ``weights.association > 0`` (:class:`~heaprank.CoUse`); ``None``
            (the default) stores no edges.
        pooled_min_namespaces: A feature holding a caller's value (a kind, source or tag
            outside the codebook) borrows pooled counts only once this many namespaces hold it
            (>= 1; 1: always): ``heaprank.model.privacy``, docs/tenancy.md.
    """

    GROUP: ClassVar[str] = "learning"

    prior: Prior = field(default_factory=Prior)
    em_credit: bool = True
    reject_discount: Literal["none", "log", "fitted"] = "log"
    co_use: CoUse | None = None
    pooled_min_namespaces: int = DEFAULT_MIN_NAMESPACES

    def __post_init__(self) -> None:
        if not isinstance(self.prior, Prior):
            raise ConfigError(f"{self._at('prior')}: expected Prior, got "
                              f"{type(self.prior).__name__}")
        check_bool(self._at("em_credit"), self.em_credit)
        check_choice(self._at("reject_discount"), self.reject_discount, ("none", "log", "fitted"))
        if self.co_use is not None and not isinstance(self.co_use, CoUse):
            raise ConfigError(f"{self._at('co_use')}: expected CoUse or None, got "
                              f"{type(self.co_use).__name__}")
        check_min_namespaces(self._at("pooled_min_namespaces"), self.pooled_min_namespaces)
