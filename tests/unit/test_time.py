"""Time values: epoch seconds, datetimes (naive means UTC) and ISO 8601 strings."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from heaprank import Config, InputError, Reranker
from heaprank._time import resolve_now, to_epoch

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
    cfg = Config(recency_floor=0.5, half_life_s=30 * 86_400.0)  # pinned, not the defaults
    r = Reranker(config=cfg).rerank("What was discussed?", cands, now=now)[0]
    assert "age 30.0d" in r.explain()
    assert r.signals["recency"] == pytest.approx(0.5 + 0.5 * 0.5)  # one half-life, floor 0.5


def test_bad_now_is_rejected():
    with pytest.raises(InputError, match="now: cannot parse"):
        Reranker().rerank("q", [{"id": "a", "text": "t"}], now="soon")
