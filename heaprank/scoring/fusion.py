"""Fusion of several retriever scores a candidate carries into one relevance.

A hybrid retriever often knows more than one score per candidate (BM25 and a dense cosine, say)
and hands on only one of them, or a fused one. heaprank reads the others from
``metadata.retriever_scores`` (a mapping ``name -> similarity``, higher is better) when
``Config.scoring.fusion_weights`` names them, and blends them with the primary relevance:

    fused_i = (norm(rel)_i + sum_j w_j norm(s_j)_i) / (1 + sum_j w_j)

where ``norm`` is min-max over this candidate list (1 when all are equal), ``rel`` is the
relevance of the primary ``score`` and ``w_j`` is ``Config.scoring.fusion_weights[j]``. A candidate that
lacks score ``j`` counts as the list's lowest for it (a retriever that did not return it ranks
it last); a score that no candidate carries is left out of the blend. The blend is mapped back
onto ``[floor, 1]`` like a single score, so with no fusion weights nothing changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import InputError, InputTypeError
from .candidates import CandidateBatch

FIELD = "retriever_scores"


def _metadata(item: object) -> Mapping[str, object]:
    meta = getattr(item, "metadata", None) if not isinstance(item, Mapping) \
        else item.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def retriever_scores(batch: CandidateBatch, names: Sequence[str]) -> np.ndarray:
    """``(n, len(names))`` float64: each candidate's named retriever scores, NaN where absent.

    Raises:
        InputTypeError: ``retriever_scores`` is not a mapping, or a score is not a number.
        InputError: a score is NaN or infinite.
    """
    out = np.full((len(batch), len(names)), math.nan)
    for i, item in enumerate(batch.items):
        given = _metadata(item).get(FIELD)
        if given is None:
            continue
        where = f"candidates[{i}] (id {batch.ids[i]!r}).metadata.{FIELD}"
        if not isinstance(given, Mapping):
            raise InputTypeError(f"{where}: expected a mapping of score name to number, got "
                                 f"{type(given).__name__}")
        for j, name in enumerate(names):
            value = given.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise InputTypeError(f"{where}[{name!r}]: expected a number, got "
                                     f"{type(value).__name__}")
            if not math.isfinite(float(value)):
                raise InputError(f"{where}[{name!r}]: must be finite, got {value!r}")
            out[i, j] = float(value)
    return out


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        return np.ones_like(x)
    return (x - lo) / (hi - lo)


def fuse(relevance: np.ndarray, scores: np.ndarray, weights: Sequence[float],
         floor: float) -> np.ndarray:
    """The blended relevance on ``[floor, 1]`` (module docstring); ``scores`` as returned by
    :func:`retriever_scores`, ``weights`` one per column."""
    total = _minmax(relevance)
    mass = 1.0
    for j, w in enumerate(weights):
        column = scores[:, j]
        present = ~np.isnan(column)
        if w == 0 or not present.any():
            continue
        filled = np.where(present, column, column[present].min())
        total = total + w * _minmax(filled)
        mass += w
    blended = _minmax(np.round(total / mass, 12))
    return np.maximum(floor + (1.0 - floor) * blended, 1e-12)
