"""The optional C kernels of the pipeline's stages, and the switch that turns them all off.

Each stage module asks :func:`kernels` for its kernels once, at import, and calls them where it
would otherwise run its Python passes. The Python passes are the specification: a kernel gives
exactly what its twin gives (property tests hold them to the bit), or returns None for input it
does not take, and the twin runs. The kernels are built from the C sources in this folder when
heaprank is installed with a C compiler at hand; without one, or with ``HEAPRANK_PURE_PYTHON=1``
in the environment when heaprank is imported, every stage runs its Python passes.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: Set to turn the kernels off (read once, at import).
PURE_PYTHON_ENV = "HEAPRANK_PURE_PYTHON"

#: The stages that have kernels, each the name of its extension module's stage.
STAGES = ("candidates", "features", "signals", "rank", "feedback")

_OFF = os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def _load() -> ModuleType | None:
    if _OFF:
        return None
    try:
        return importlib.import_module(f"{__name__}._kernels")
    except ImportError:  # built without a compiler: the pure-Python passes only
        return None


_built = _load()


def kernels(stage: str) -> ModuleType | None:
    """The compiled kernels of ``stage`` (one of :data:`STAGES`), or None: not built, or
    turned off by ``HEAPRANK_PURE_PYTHON``."""
    if stage not in STAGES:
        raise ValueError(f"stage: expected one of {', '.join(STAGES)}, got {stage!r}")
    return _built


#: Whether any kernel is in use (for reports and tests).
speedups: ModuleType | None = _built
