"""The optional C kernels at the candidates / features boundary, and their off switch.

Two stages have kernels (:data:`STAGES`), where the profile shows C paying for itself: the
candidates stage (checking and converting the retriever's candidates into columns) and the
features stage (finding each candidate's cached feature rows). Each has one extension module,
``heaprank._accel._<stage>``, built from ``heaprank/_accel/_<stage>.c``. The stage's Python
module asks :func:`kernels` for it once, at import, and calls its kernels where it would
otherwise run its Python passes; every other stage is Python (and numpy) only. The
Python passes are the specification: a kernel gives exactly what its twin gives (property tests
hold them to the bit), or returns None for input it does not take, and the twin runs. The
modules are built when heaprank is installed with a C compiler at hand; without one, or with
``HEAPRANK_PURE_PYTHON=1`` in the environment when heaprank is imported, every stage runs its
Python passes.

What a kernel may not do, whatever its input (heaprank/_accel/_kernels.h): keep a borrowed
pointer across a call that can run Python code, iterate a sequence it does not hold, or read
an object pointer from a buffer Python can write.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: Set to turn the kernels off (read once, at import).
PURE_PYTHON_ENV = "HEAPRANK_PURE_PYTHON"

#: The stages that have kernels, each the name of its extension module (``_<stage>``).
STAGES = ("candidates", "features")

_OFF = os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")
_loaded: dict[str, ModuleType | None] = {}


def _load(stage: str) -> ModuleType | None:
    if _OFF:
        return None
    try:
        return importlib.import_module(f"{__name__}._{stage}")
    except ImportError:  # built without a compiler: the stage's Python passes only
        return None


def kernels(stage: str) -> ModuleType | None:
    """The compiled kernels of ``stage`` (one of :data:`STAGES`), or None: not built, or
    turned off by ``HEAPRANK_PURE_PYTHON``."""
    if stage not in STAGES:
        raise ValueError(f"stage: expected one of {', '.join(STAGES)}, got {stage!r}")
    if stage not in _loaded:
        _loaded[stage] = _load(stage)
    return _loaded[stage]


def built() -> dict[str, bool]:
    """Per stage, whether its kernels are in use (for reports and tests)."""
    return {stage: kernels(stage) is not None for stage in STAGES}
