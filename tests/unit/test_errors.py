"""The exception tree: callers can catch ValueError, TypeError, ImportError or HeapRankError."""

from __future__ import annotations

import pytest

from heaprank import (
    ConfigError,
    FeedbackError,
    HeapRankError,
    InputError,
    MissingDependencyError,
    StateError,
)
from heaprank.errors import InputTypeError


@pytest.mark.parametrize("exc, bases", [
    (ConfigError, (HeapRankError, ValueError)),
    (InputError, (HeapRankError, ValueError)),
    (InputTypeError, (HeapRankError, TypeError)),
    (FeedbackError, (HeapRankError, ValueError)),
    (StateError, (HeapRankError,)),
    (MissingDependencyError, (HeapRankError, ImportError)),
])
def test_exception_tree(exc, bases):
    assert issubclass(exc, bases)
    assert issubclass(HeapRankError, Exception)


def test_state_error_is_not_a_value_error():
    assert not issubclass(StateError, ValueError)


def test_type_and_value_errors_stay_apart():
    assert not issubclass(InputTypeError, ValueError)
    assert not issubclass(InputError, TypeError)


def test_wrong_types_in_candidates_raise_the_library_type_error():
    from heaprank.scoring.candidates import coerce_candidates
    with pytest.raises(InputTypeError, match=r"^candidates\[0\]\.id: expected str, got int$"):
        coerce_candidates([{"id": 3, "text": "t"}], now=1_750_000_000.0)
    with pytest.raises(InputTypeError, match=r"^candidates: expected a sequence of candidates, got int$"):
        coerce_candidates(3, now=1_750_000_000.0)
