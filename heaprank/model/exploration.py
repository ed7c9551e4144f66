"""Exploration: for a share of reranks, usefulness from one Thompson draw of each link's Beta
posterior instead of its mean, so links with little evidence get shown and learned."""

from __future__ import annotations

import threading

import numpy as np


class Explorer:
    """The draws of one reranker (seeded by ``Config.exploration.seed``; thread-safe)."""

    def __init__(self, seed: int | None) -> None:
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()  # a numpy Generator is not thread-safe

    def sample(self, rate: float, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray | None:
        """For a share ``rate`` of calls, one draw of every link from its Beta posterior;
        otherwise None. No draw at all when the rate is 0, so exploration off ranks exactly as
        without it."""
        if rate <= 0.0:
            return None
        with self._lock:
            if self._rng.random() >= rate:
                return None
            return self._rng.beta(alpha, beta)
