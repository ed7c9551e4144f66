"""Typed, validated configuration: the signal weights, and one small settings group per stage
that reads them (:class:`Inputs`, :class:`Features`, :class:`Scoring`, :class:`Retention`,
:class:`Learning`, :class:`Refit`, :class:`Exploration`), each checking its own fields."""

from ._base import MAX_WEIGHT
from ._mapping import FLAT_KEYS
from .core import GROUPS, Config
from .exploration import Exploration
from .features import Features
from .files import load_config, save_config
from .inputs import Inputs
from .learning import Learning
from .refit import Refit
from .retention import RECENCY_KERNELS, Retention
from .scoring import DEFAULT_INTENT_RECENCY, DEFAULT_KIND_IMPORTANCE, RECENCY_EVERY_QUESTION, Scoring
from .weights import SIGNALS, Weights

__all__ = [
    "DEFAULT_INTENT_RECENCY",
    "DEFAULT_KIND_IMPORTANCE",
    "FLAT_KEYS",
    "GROUPS",
    "MAX_WEIGHT",
    "RECENCY_EVERY_QUESTION",
    "RECENCY_KERNELS",
    "SIGNALS",
    "Config",
    "Exploration",
    "Features",
    "Inputs",
    "Learning",
    "Refit",
    "Retention",
    "Scoring",
    "Weights",
    "load_config",
    "save_config",
]
