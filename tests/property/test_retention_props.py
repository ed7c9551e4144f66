"""Properties of Ebbinghaus retention and HEBBS reinforcement (heaprank.model.retention, signals)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from heaprank.model.retention import (
    RetentionPolicy,
    days_until_forgotten,
    forgotten,
    retention,
    stability_days,
)
from heaprank.scoring.signals import reinforcement

days = st.floats(0.0, 5_000.0)
doses = st.floats(0.05, 10.0)
uses = st.floats(0.0, 1_000.0)
policies = st.builds(RetentionPolicy, half_life_days=st.floats(0.5, 1_000.0),
                     k_importance=st.floats(0.0, 10.0), k_access=st.floats(0.0, 10.0),
                     threshold=st.floats(0.01, 0.99), min_retention_days=st.floats(0.0, 60.0))


def _r(idle: float, imp: float, use: float, policy: RetentionPolicy) -> float:
    return float(retention(np.array([idle]), np.array([imp]), np.array([use]), policy)[0])


@given(days, days, doses, uses, policies)
def test_retention_never_rises_with_idle_time(t1, t2, imp, use, policy):
    lo, hi = sorted((t1, t2))
    assert _r(hi, imp, use, policy) <= _r(lo, imp, use, policy)
    assert 0.0 <= _r(hi, imp, use, policy) <= 1.0
    assert _r(0.0, imp, use, policy) == 1.0


@given(days, doses, doses, uses, policies)
def test_importance_lengthens_stability_and_retention(t, a, b, use, policy):
    lo, hi = sorted((a, b))
    assert stability_days(np.array([hi]), np.array([use]), policy)[0] >= \
        stability_days(np.array([lo]), np.array([use]), policy)[0]
    assert _r(t, hi, use, policy) >= _r(t, lo, use, policy)


@given(days, doses, uses, uses, policies)
def test_uses_lengthen_stability_and_retention(t, imp, a, b, policy):
    lo, hi = sorted((a, b))
    assert _r(t, imp, hi, policy) >= _r(t, imp, lo, policy)
    later = days_until_forgotten(np.array([imp, imp]), np.array([lo, hi]), policy)
    assert later[1] >= later[0]


@given(st.floats(0.0, 60.0), doses, uses, policies)
def test_nothing_is_forgotten_before_the_minimum_retention(t, imp, use, policy):
    assume(t < policy.min_retention_days)
    extreme = RetentionPolicy(half_life_days=0.5, k_importance=0.0, k_access=0.0,
                              threshold=0.99, min_retention_days=policy.min_retention_days)
    assert not forgotten(np.array([t]), np.array([imp]), np.array([use]), extreme)[0]
    assert not forgotten(np.array([t]), np.array([imp]), np.array([use]), policy)[0]


@given(days, doses, uses, policies)
def test_forgotten_exactly_past_the_day_the_threshold_is_crossed(t, imp, use, policy):
    day = float(days_until_forgotten(np.array([imp]), np.array([use]), policy)[0])
    assume(abs(t - day) > 1e-6 * max(1.0, day))  # away from the rounding edge
    is_forgotten = bool(forgotten(np.array([t]), np.array([imp]), np.array([use]), policy)[0])
    assert is_forgotten == (t > day)
    if is_forgotten:
        assert _r(t, imp, use, policy) < policy.threshold


@given(days, doses, uses, policies)
def test_an_exempt_namespace_forgets_nothing(t, imp, use, policy):
    exempt = RetentionPolicy(**{**policy.to_dict(), "enabled": False})
    assert not forgotten(np.array([t]), np.array([imp]), np.array([use]), exempt)[0]
    assert math.isinf(days_until_forgotten(np.array([imp]), np.array([use]), exempt)[0])


@given(uses, uses, st.floats(1.0, 10_000.0))
def test_reinforcement_grows_with_use_and_is_capped(a, b, cap):
    lo, hi = sorted((a, b))
    r = reinforcement(np.array([0.0, lo, hi, cap, cap * 10]), cap=cap)
    assert r[0] == 1.0
    assert 1.0 <= r[1] <= r[2] <= 2.0 + 1e-12
    assert r[3] == r[4] == pytest.approx(2.0)  # the cap: no document outgrows it
