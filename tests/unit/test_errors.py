"""The exception tree: callers can catch ValueError, ImportError or HeapRankError."""

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


@pytest.mark.parametrize("exc, bases", [
    (ConfigError, (HeapRankError, ValueError)),
    (InputError, (HeapRankError, ValueError)),
    (FeedbackError, (HeapRankError, ValueError)),
    (StateError, (HeapRankError,)),
    (MissingDependencyError, (HeapRankError, ImportError)),
])
def test_exception_tree(exc, bases):
    assert issubclass(exc, bases)
    assert issubclass(HeapRankError, Exception)


def test_state_error_is_not_a_value_error():
    assert not issubclass(StateError, ValueError)
