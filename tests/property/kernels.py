"""The compiled kernels of one stage for its tests, or a skip (a failure under CI).

The kernels are optional (an install without a C compiler runs the Python passes only); with
``HEAPRANK_REQUIRE_SPEEDUPS=1`` (``.ci/run`` sets it) a stage's missing kernels are a failure
instead of a skip, but under ``HEAPRANK_PURE_PYTHON=1``, which turns them off.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest

from heaprank import _accel


def stage_kernels(stage: str) -> ModuleType:
    """The extension module of ``stage``, or a module-level skip (or failure) of the caller."""
    built = _accel.kernels(stage)
    if built is not None:
        return built
    if os.environ.get("HEAPRANK_REQUIRE_SPEEDUPS") == "1" and \
            os.environ.get(_accel.PURE_PYTHON_ENV, "") in ("", "0"):
        pytest.fail(f"HEAPRANK_REQUIRE_SPEEDUPS=1 but heaprank._accel._{stage} did not build or "
                    f"load (is a C compiler installed? pip install -e . rebuilds it)",
                    pytrace=False)
    pytest.skip(f"heaprank._accel._{stage} is not built (or HEAPRANK_PURE_PYTHON is set): the "
                f"Python passes are tested everywhere else", allow_module_level=True)
