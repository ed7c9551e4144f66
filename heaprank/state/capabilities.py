"""What a state backend may offer beyond :class:`~heaprank.state.base.StateBackend`, each
declared as a Protocol, and :func:`capabilities`, which the reranker calls once when it opens a
state: every later call goes to the capability it found, typed, with no lookup by name.

- :class:`VersionedState`: a ``version`` that changes whenever the link counts may have, and
  the documents read alone: while the version stands, a reader keeps what it derived from the
  counts (memory, SQLite).
- :class:`EdgeBackend`: co-use edges (every backend of heaprank; ``Config(co_use=...)``).
- :class:`LeanFeedback`: a feedback on a fresh recall applied straight from the impression as
  written (memory).
- :class:`GroupFeedback`: several feedbacks in one transaction (SQLite's group commit).
- :class:`AsyncProvider`: an async twin of the hot path for an event loop (Redis from a URL).
- :class:`DocLister`: every used document of a namespace (for ``forget_candidates``).
- :class:`LocalImpressions`: impressions held in this process, so reading one back costs no I/O
  (memory): the reranker then keeps no copy of its own.
- :class:`RecallIds`: recall ids minted by the state, carrying where it keeps the impression
  (Redis: the namespace's bucket); other states take :func:`~heaprank.records.new_recall_id`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ..errors import FeedbackError, StateError
from ..records import DocStats, FeedbackBatch, FeedbackOutcome, Impression, LinkCounts, UsedFeedback
from .base import CreditFn, StateBackend
from .edges import EdgeRows


@runtime_checkable
class VersionedState(Protocol):
    """A state with a version: while it stands, the link counts are unchanged, and the
    documents can be read without them."""

    @property
    def version(self) -> object:
        """Changes whenever a link count may have changed (by this process or another)."""
        ...

    def read_docs(self, namespace: str, ids: Sequence[str]) -> DocStats:
        """The documents' stats alone (:meth:`StateBackend.read` without the links)."""
        ...


@runtime_checkable
class EdgeBackend(Protocol):
    """A backend that stores co-use edges (every backend of heaprank does; a backend of your own
    needs these two only for ``Config(co_use=...)``)."""

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        """:meth:`StateBackend.read` plus the edges among ``ids``, in the same read."""
        ...

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        """Every edge of ``namespace`` as stored: ``(a, b, strength, count, last)``, ``a < b``,
        sorted."""
        ...


@runtime_checkable
class AsyncStateBackend(Protocol):
    """The hot path of a :class:`StateBackend` for an event loop: what ``Reranker.arerank`` and
    ``afeedback`` call, with the same meaning as the sync methods of the same names.

    A sync backend that has one offers it as ``async_backend()`` (called on the running loop,
    returning None when it has none for it); the reranker's async methods fall back to running
    the sync backend in a worker thread.
    """

    async def read(self, namespace: str, features: Sequence[str],
                   ids: Sequence[str]) -> tuple[LinkCounts, DocStats]: ...

    async def put_impression(self, impression: Impression, *,
                             feedback_id: str | None = None) -> str | None: ...

    async def get_impression(self, recall_id: str) -> Impression | None: ...

    async def apply_feedback(self, batch: FeedbackBatch, credit: CreditFn) -> FeedbackOutcome: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class AsyncEdgeBackend(Protocol):
    """An :class:`AsyncStateBackend` that also stores co-use edges: its ``apply_feedback``
    honours ``batch.co_use`` and it reads edges as :class:`EdgeBackend` does. With
    ``Config(co_use=...)`` the reranker's async methods use an async twin only if it is one;
    otherwise they run the sync backend in a worker thread."""

    async def read_with_edges(self, namespace: str, features: Sequence[str],
                              ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]: ...


@runtime_checkable
class LeanFeedback(Protocol):
    """A state that applies ``feedback(recall_id, used)`` on a fresh recall straight from the
    impression it holds, without the general path's :class:`~heaprank.records.FeedbackBatch`."""

    def apply_used(self, request: UsedFeedback) -> FeedbackOutcome | None:
        """The feedback's outcome, or None where the general path must run (the recall is not
        a fresh one of this namespace, an id was not shown): that path then applies it or
        raises, so both paths share one set of checks and messages."""
        ...


@runtime_checkable
class GroupFeedback(Protocol):
    """A state that applies several feedbacks in one transaction."""

    def apply_feedback_many(self, batches: Sequence[FeedbackBatch],
                            credit: CreditFn) -> list[FeedbackOutcome | FeedbackError]:
        """Each batch as :meth:`StateBackend.apply_feedback` would apply it, one outcome (or the
        error that kept it from being applied) per batch, in order."""
        ...


@runtime_checkable
class AsyncProvider(Protocol):
    """A sync state that offers an async twin of its hot path for the running event loop."""

    def async_backend(self) -> AsyncStateBackend | None:
        """The twin for the running loop (called on it), or None when there is none for it."""
        ...

    async def aclose_loop(self) -> None:
        """Release the twin of the running loop."""
        ...


@runtime_checkable
class DocLister(Protocol):
    """A state that lists the documents it keeps stats of."""

    def iter_docs(self, namespace: str) -> Sequence[tuple[str, float, float]]:
        """``(id, last_used, use_count)`` of each used document of ``namespace``."""
        ...


@runtime_checkable
class LocalImpressions(Protocol):
    """A state whose impressions live in this process: reading one back costs no I/O."""

    impressions_in_process: Literal[True]


@runtime_checkable
class RecallIds(Protocol):
    """A state that mints the recall ids of its impressions (a well-formed id that
    :func:`~heaprank.records.recall_key` reads, made fresh at every call)."""

    def new_recall_id(self, namespace: str) -> str:
        """A fresh recall id for an impression of ``namespace``."""
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """A state and its optional capabilities (None: it has not got that one), each the state
    itself typed as the Protocol it satisfies."""

    state: StateBackend
    versioned: VersionedState | None
    edges: EdgeBackend | None
    lean: LeanFeedback | None
    group: GroupFeedback | None
    async_provider: AsyncProvider | None
    docs: DocLister | None
    local_impressions: bool
    recall_ids: RecallIds | None = None


def capabilities(state: StateBackend) -> Capabilities:
    """What ``state`` declares beyond :class:`StateBackend` (checked once, when it is opened)."""
    try:
        versioned = state if isinstance(state, VersionedState) else None
    except StateError:  # its version could not be read now: treated as having none
        versioned = None
    return Capabilities(
        state=state,
        versioned=versioned,
        edges=state if isinstance(state, EdgeBackend) else None,
        lean=state if isinstance(state, LeanFeedback) else None,
        group=state if isinstance(state, GroupFeedback) else None,
        async_provider=state if isinstance(state, AsyncProvider) else None,
        docs=state if isinstance(state, DocLister) else None,
        local_impressions=isinstance(state, LocalImpressions),
        recall_ids=state if isinstance(state, RecallIds) else None,
    )
