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
 |    +-- StateFullError         the backend has no room left (a full disk)
 |    +-- StateReadOnlyError     the backend refuses writes (a read-only file or mount)
 |    +-- StateCorruptError      a stored value is unreadable (the message names where)
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
    reranker is strict); ``feedback`` raises it, and sending the same feedback again is safe (it
    is applied once per recall and item, whether or not the first attempt got through).
    """


class StateFullError(StateError):
    """The state has no room for a write (SQLite: the disk or the file's quota is full).

    ``rerank`` then ranks untracked, flagged in EXPLAIN (unless strict); ``feedback`` raises it,
    having applied nothing (the transaction rolled back)."""


class StateReadOnlyError(StateError):
    """The state refuses writes: opened read-only, or its file or mount is not writable."""


class StateCorruptError(StateError):
    """A stored value cannot be read as what it should be; the message names the table and
    column (or key) it came from. Nothing is altered."""


class ScrubIncompleteError(StateError):
    """A namespace was forgotten, but copies of its bytes remain where heaprank could not yet
    overwrite them (a SQLite write-ahead log another reader holds open). Nothing of it can be
    read through heaprank; the message says how to finish the scrub."""
