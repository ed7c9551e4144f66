"""heaprank: re-rank retrieved candidates by relevance, recency, importance and learned usefulness.

Drop it between a retriever and a prompt: it re-scores candidates from any retriever, explains
every position, and learns from which items the answer used.
"""

from ._version import __version__
from .config import (
    Config,
    Exploration,
    Features,
    Inputs,
    Learning,
    Refit,
    Retention,
    Scoring,
    Weights,
)
from .errors import (
    ConfigError,
    FeedbackError,
    HeapRankError,
    InputError,
    InputTypeError,
    MissingDependencyError,
    ScrubIncompleteError,
    StateCorruptError,
    StateError,
    StateFullError,
    StateReadOnlyError,
    StateUnavailableError,
)
from .model.co_use import CoUse
from .model.links import Prior
from .reranker import Link, Reranker
from .scoring.candidates import Candidate
from .scoring.results import Ranked, Ranking, WhyNot
from .scoring.rules import Rule
from .state import MemoryState, SQLiteState, StateBackend

__all__ = [
    "Candidate",
    "CoUse",
    "Config",
    "ConfigError",
    "Exploration",
    "Features",
    "FeedbackError",
    "HeapRankError",
    "InputError",
    "InputTypeError",
    "Inputs",
    "Learning",
    "Link",
    "MemoryState",
    "MissingDependencyError",
    "Prior",
    "Ranked",
    "Ranking",
    "Refit",
    "Reranker",
    "Retention",
    "Rule",
    "SQLiteState",
    "Scoring",
    "ScrubIncompleteError",
    "StateBackend",
    "StateCorruptError",
    "StateError",
    "StateFullError",
    "StateReadOnlyError",
    "StateUnavailableError",
    "Weights",
    "WhyNot",
    "__version__",
]


def __getattr__(name: str) -> object:
    """``heaprank.RedisState`` on first use, so ``import heaprank`` never needs redis-py."""
    if name == "RedisState":
        from .state.redis.backend import RedisState

        return RedisState
    raise AttributeError(f"module 'heaprank' has no attribute {name!r}")
