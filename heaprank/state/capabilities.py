"""What a state backend may offer beyond :class:`~heaprank.state.base.StateBackend`, each
declared as a Protocol, and :func:`capabilities`, which the reranker calls once when it opens a
state: every later call goes to the capability it found, typed, with no lookup by name.

- :class:`VersionedState`: a ``version`` that changes whenever the link counts may have, and
  the documents read alone: while the version stands, a reader keeps what it derived from the
  counts (memory, SQLite).
- :class:`EdgeBackend`: co-use edges (every backend of heaprank; ``Config(learning=Learning(co_use=...))``).
- :class:`AsyncProvider`: an async twin of the hot path for an event loop (Redis from a URL).
- :class:`DocLister`: every used document of a namespace (for ``forget_candidates``).
- :class:`GroupCommit`: a list of updates applied in one transaction (memory, SQLite): a
  feedback of the list is worked out from the counts as the ones before it leave them, and the
  list is applied at once; other states are handed one update at a time.
- :class:`RecallIds`: recall ids minted by the state, carrying where it keeps the impression
  (Redis: the namespace's bucket); other states take :func:`~heaprank.records.new_recall_id`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ..errors import StateError
from ..model.evidence import DocStats, EdgeRows, LinkCounts
from ..records import EdgeState, Impression, Update
from .base import StateBackend


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
    needs these two only for ``Config(learning=Learning(co_use=...))``)."""

    def read_with_edges(self, namespace: str, features: Sequence[str],
                        ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        """:meth:`StateBackend.read` plus the edges among ``ids``, in the same read."""
        ...

    def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        """Every edge of ``namespace`` as stored: ``(a, b, strength, count, last)``, ``a < b``,
        sorted."""
        ...

    def edge_state(self, namespace: str, docs: Sequence[str]) -> EdgeState:
        """Every edge of ``docs`` in ``namespace`` (a copy), the version the namespace's edges
        are at (an update's change applies only while they still are) and its edge count."""
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

    async def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts: ...

    async def apply(self, updates: Sequence[Update]) -> list[bool]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class AsyncEdgeBackend(Protocol):
    """An :class:`AsyncStateBackend` that also stores co-use edges: its ``apply`` writes an
    update's ``edges`` and it reads edges as :class:`EdgeBackend` does. With
    ``Config(learning=Learning(co_use=...))`` the reranker's async methods use an async twin
    only if it is one; otherwise they run the sync backend in a worker thread."""

    async def read_with_edges(self, namespace: str, features: Sequence[str],
                              ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]: ...

    async def edge_state(self, namespace: str, docs: Sequence[str]) -> EdgeState: ...

    async def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]: ...


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
class GroupCommit(Protocol):
    """A state whose ``apply`` applies a whole list in one transaction."""

    group_commit: Literal[True]


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
    async_provider: AsyncProvider | None
    docs: DocLister | None
    group_commit: bool = False
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
        async_provider=state if isinstance(state, AsyncProvider) else None,
        docs=state if isinstance(state, DocLister) else None,
        group_commit=isinstance(state, GroupCommit),
        recall_ids=state if isinstance(state, RecallIds) else None,
    )
