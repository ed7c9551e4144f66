"""Time values: epoch seconds, datetimes (naive means UTC) and ISO 8601 strings."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import numpy as np
import pytest

from heaprank import Config, InputError, Inputs, Reranker, Retention, Scoring
from heaprank._time import EARLIEST_S, LATEST_S, resolve_now, to_epoch
from heaprank.config import RECENCY_EVERY_QUESTION
from heaprank.errors import InputTypeError

NOW = 1_750_000_000.0  # 2025-06-15T15:06:40Z


@pytest.mark.parametrize("value", [
    NOW,
    int(NOW),
    np.float64(NOW),
    np.int64(int(NOW)),
    datetime(2025, 6, 15, 15, 6, 40),  # naive: UTC
    datetime(2025, 6, 15, 15, 6, 40, tzinfo=timezone.utc),
    datetime(2025, 6, 15, 17, 6, 40, tzinfo=timezone(timedelta(hours=2))),
    "2025-06-15T15:06:40Z",
    "2025-06-15T15:06:40+00:00",
    "2025-06-15T17:06:40+02:00",
    "2025-06-15 15:06:40",  # naive ISO: UTC
    "  2025-06-15T15:06:40Z ",
])
def test_every_time_form_means_the_same_instant(value):
    assert to_epoch(value, "now") == NOW


def test_fractional_seconds_survive():
    assert to_epoch("2025-06-15T15:06:40.250Z", "t") == NOW + 0.25


def test_date_only_string_is_midnight_utc():
    assert to_epoch("2025-06-15", "t") == NOW - (15 * 3600 + 6 * 60 + 40)


@pytest.mark.parametrize("value, exc, match", [
    ("next tuesday", InputError, r"when: cannot parse 'next tuesday'"),
    ("", InputError, r"when: cannot parse"),
    (math.nan, InputError, r"when: time must be finite"),
    (math.inf, InputError, r"when: time must be finite"),
    pytest.param(10**400, InputError, r"when: time must be finite", id="int-overflow"),
    (True, TypeError, r"when: .*got bool"),
    ([1, 2], TypeError, r"when: .*got list"),
    (None, TypeError, r"when: .*got NoneType"),
])
def test_bad_times_name_the_field(value, exc, match):
    with pytest.raises(exc, match=match):
        to_epoch(value, "when")


def test_resolve_now_reports_whether_the_caller_chose_the_time():
    assert resolve_now(NOW) == (NOW, True)
    assert resolve_now("2025-06-15T15:06:40Z") == (NOW, True)
    before = time.time()
    wall, explicit = resolve_now(None)
    assert explicit is False and before <= wall <= time.time()


@pytest.mark.parametrize("now", [NOW, datetime(2025, 6, 15, 15, 6, 40), "2025-06-15T15:06:40Z",
                                 datetime(2025, 6, 15, 15, 6, 40, tzinfo=timezone.utc)])
def test_rerank_accepts_every_form_of_now(now):
    cands = [{"id": "a", "text": "Meeting notes", "score": 1.0,
              "metadata": {"created_at": "2025-05-16T15:06:40Z"}}]
    cfg = Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION),
                 retention=Retention(recency_floor=0.5, half_life_s=30 * 86_400.0))
    r = Reranker(config=cfg).rerank("What was discussed?", cands, now=now)[0]
    assert "age 30.0d" in r.explain()
    assert r.signals["recency"] == pytest.approx(0.5 + 0.5 * 0.5)  # one half-life, floor 0.5


def test_bad_now_is_rejected():
    with pytest.raises(InputError, match="now: cannot parse"):
        Reranker().rerank("q", [{"id": "a", "text": "t"}], now="soon")


# ----------------------------------------------------------------- one plausibility rule

@pytest.mark.parametrize("value", [EARLIEST_S, LATEST_S, 0, -1.0, "1900-01-01T00:00:00Z",
                                   "2199-12-31T23:59:59Z", datetime(1900, 1, 1)])
def test_the_bounds_are_plausible(value):
    assert EARLIEST_S <= to_epoch(value, "t") <= LATEST_S


@pytest.mark.parametrize("value, match", [
    (4e12, r"t: 4000000000000.0 is not a plausible time .*looks like milliseconds"),
    (NOW * 1000, r"looks like milliseconds: divide by 1000"),
    (int(NOW) * 1_000_000, r"looks like microseconds"),
    (NOW * 1e9, r"looks like nanoseconds"),
    (1e300, r"t: 1e\+300 is not a plausible time in epoch seconds \(expected 1900-01-01 to "
            r"2200-01-01, -2208988800 to 7258118400\)$"),
    (LATEST_S + 1, r"not a plausible time"),
    (EARLIEST_S - 1, r"not a plausible time"),
    ("1899-12-31T23:59:59Z", r"not a plausible time"),
    ("2200-01-01T00:00:01+00:00", r"not a plausible time"),
    (datetime(1, 1, 1), r"not a plausible time"),
    (np.float64(-1e13), r"not a plausible time"),
])
def test_implausible_times_are_input_errors_naming_the_field(value, match):
    with pytest.raises(InputError, match=match):
        to_epoch(value, "t")


@pytest.mark.parametrize("value", [True, np.bool_(False), Decimal("1.7e9"), b"2025-01-01", None])
def test_wrong_time_types_are_input_type_errors(value):
    with pytest.raises(InputTypeError, match=r"^t: expected epoch seconds, datetime or ISO string"):
        to_epoch(value, "t")


def test_resolve_now_applies_the_same_rule():
    with pytest.raises(InputError, match=r"^now: .*looks like milliseconds"):
        resolve_now(4e12)


def test_rerank_rejects_now_in_milliseconds():
    with pytest.raises(InputError, match=r"now: .*looks like milliseconds"):
        Reranker().rerank("q", [{"id": "a", "text": "t"}], now=4e12)


def test_candidate_times_follow_the_same_rule_and_lenient_mode_flags_them():
    items = [{"id": "a", "text": "t", "metadata": {"created_at": 4e12, "last_used": NOW - 5}}]
    with pytest.raises(InputError, match=r"candidates\[0\] \(id 'a'\)\.metadata\.created_at: .*milliseconds"):
        Reranker().rerank("q", items, now=NOW)
    r = Reranker(config=Config(inputs=Inputs(on_invalid="neutral"))).rerank("q", items, now=NOW)[0]
    assert "created_at not a plausible time" in r.explain()
    assert any(f.startswith("created_at not a plausible time") for f in r.flags)
