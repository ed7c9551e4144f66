"""The optional C kernels of the per-candidate passes, and the switch that turns them off.

``heaprank._accel._kernels`` is built from ``heaprank/_accel/_kernels.c`` when the package is installed
with a C compiler at hand; without one (or with ``HEAPRANK_PURE_PYTHON=1`` in the environment
when heaprank is imported) :data:`speedups` is None and every pass runs its pure-Python twin,
which is the specification: a kernel gives exactly what its twin gives, or defers to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

#: Set to turn the kernels off (read once, at import).
PURE_PYTHON_ENV = "HEAPRANK_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        from . import _kernels
    except ImportError:  # built without a compiler: the pure-Python passes only
        return None
    return _kernels


#: The C kernels, or None.
speedups: ModuleType | None = _load()


def _shape_rows(kernels: ModuleType | None) -> Callable[..., Any] | None:
    """The feature-rows kernel, if this process hashes tuples as the kernel does: it finds the
    shapes the Python path cached under ``hash((prefix, kind, source))``."""
    if kernels is None:
        return None
    samples = [("a text", None, "maya"), ("", "fact", None), ("é" * 40, "note", "Ben"),
               ("x" * 3000, None, None)]
    if any(kernels.shape_key(t, k, s, 2000) != hash((t[:2000], k, s)) for t, k, s in samples):
        return None
    rows: Callable[..., Any] = kernels.shape_rows
    return rows


#: ``_kernels.shape_rows``, or None (no kernels, or another tuple hash).
shape_rows_kernel = _shape_rows(speedups)
