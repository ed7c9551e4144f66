"""The kernel registry: one extension module per stage, asked for by stage, and one switch
that turns them all off."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from heaprank import _accel


def test_each_stage_has_its_own_module_or_none():
    for stage in _accel.STAGES:
        built = _accel.kernels(stage)
        assert built is None or built.__name__ == f"heaprank._accel._{stage}"
        assert _accel.kernels(stage) is built  # loaded once
    assert _accel.built() == {s: _accel.kernels(s) is not None for s in _accel.STAGES}


def test_only_the_candidates_and_features_stages_have_kernels():
    assert _accel.STAGES == ("candidates", "features")
    for gone in ("signals", "rank", "state"):  # issue 31: their Python passes only
        with pytest.raises(ValueError, match=f"got '{gone}'"):
            _accel.kernels(gone)


def test_an_unknown_stage_is_a_value_error():
    with pytest.raises(ValueError, match="stage: expected one of candidates"):
        _accel.kernels("explain")


def test_heaprank_pure_python_turns_the_kernels_off():
    code = ("from heaprank import _accel; from heaprank.scoring import candidates, space; "
            "print(sorted(set(_accel.built().values())), space.shape_rows_kernel, "
            "space.FeatureSpace()._table, candidates._KERNEL)")
    env = {**os.environ, "HEAPRANK_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["[False]", "None", "None", "None"]
