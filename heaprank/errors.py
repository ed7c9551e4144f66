"""Exceptions raised by heaprank.

The tree::

    HeapRankError
     +-- ConfigError        (also a ValueError): a config value is out of range
     +-- InputError         (also a ValueError): a candidate, query or argument is invalid
     +-- InputTypeError     (also a TypeError): a candidate field, query or argument has the wrong type
     +-- FeedbackError      (also a ValueError): feedback names an unknown recall or an id not shown,
     |                      or contradicts feedback already recorded
     +-- StateError         the state backend failed or holds something unreadable
 |    +-- StateUnavailableError  the backend cannot be reached (a server down or timing out)
     +-- MissingDependencyError (also an ImportError): an optional extra is not installed

Every error raised on purpose is a :class:`HeapRankError`, so one ``except HeapRankError`` catches
them all; each also subclasses the built-in a caller would catch without knowing heaprank
(``except ValueError``, ``except TypeError``). Messages name the field, e.g.
``candidates[3] (id 'x').importance: must be in (0, 10], got 1000000.0``.
"""

from __future__ import annotations


class HeapRankError(Exception):
    """Base class of every error heaprank raises on purpose."""


class ConfigError(HeapRankError, ValueError):
    """A configuration value is invalid (negative or NaN weight, floor outside [0, 1), ...)."""


class InputError(HeapRankError, ValueError):
    """A candidate, a query or an argument is invalid. The message names the field."""


class InputTypeError(HeapRankError, TypeError):
    """A candidate field, a query or an argument has the wrong type. The message names the field."""


class FeedbackError(HeapRankError, ValueError):
    """Feedback that cannot be applied: unknown recall id, an id that was not shown, or a conflict."""


class StateError(HeapRankError):
    """The learned-state backend failed or returned something unreadable."""


class MissingDependencyError(HeapRankError, ImportError):
    """An optional dependency is missing; the message names the extra that installs it."""


class StateUnavailableError(StateError):
    """The state backend cannot be reached right now (a server down, a timeout).

    ``rerank`` then ranks on the retriever and the priors, flagged in EXPLAIN (unless the
    reranker is strict); ``feedback`` raises it, having applied nothing, so it can be retried.
    """
