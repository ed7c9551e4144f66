"""What a rerank or a feedback asks of its state, as values.

A rerank and a feedback are written once as flows (:mod:`heaprank._flow`) that yield these
requests; the driver sends each one to the sync state (:meth:`send`, with the state's
:class:`~heaprank.state.capabilities.Capabilities`) or to its async twin on an event loop
(:meth:`asend`). Every request names the method it calls in code, so the calls are typed by the
Protocols they go to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Union

from ..errors import ConfigError, StateError
from ..records import FeedbackBatch, Impression
from .base import CreditFn
from .capabilities import AsyncEdgeBackend, AsyncStateBackend, Capabilities, EdgeBackend


@dataclass(frozen=True, slots=True)
class AsyncTarget:
    """An async twin of a state, and the same twin as an edge store when it is one."""

    twin: AsyncStateBackend
    edges: AsyncEdgeBackend | None

    def send(self, request: StateRequest) -> Any:
        """The awaitable of ``request`` on the twin (what :func:`heaprank._flow.adrive` awaits)."""
        return request.asend(self)


def edges_of(on: Capabilities) -> EdgeBackend:
    """The state as an edge store, or the ConfigError of a state without co-use edges."""
    if on.edges is None:
        raise ConfigError(f"co_use: the state {type(on.state).__name__} stores no co-use edges "
                          f"(it has no read_with_edges / list_edges)")
    return on.edges


class Read(NamedTuple):
    """The links of ``features`` and the stats of ``ids`` in one read."""

    namespace: str
    features: Sequence[str]
    ids: Sequence[str]

    def send(self, on: Capabilities) -> Any:
        return on.state.read(self.namespace, self.features, self.ids)

    def asend(self, on: AsyncTarget) -> Any:
        return on.twin.read(self.namespace, self.features, self.ids)


class ReadWithEdges(NamedTuple):
    """:class:`Read` plus the co-use edges among ``ids``."""

    namespace: str
    features: Sequence[str]
    ids: Sequence[str]

    def send(self, on: Capabilities) -> Any:
        return edges_of(on).read_with_edges(self.namespace, self.features, self.ids)

    def asend(self, on: AsyncTarget) -> Any:
        if on.edges is None:  # (an async rerank with co-use runs on the sync state instead)
            raise StateError("the async twin stores no co-use edges")
        return on.edges.read_with_edges(self.namespace, self.features, self.ids)


class ReadDocs(NamedTuple):
    """The stats of ``ids`` alone (a versioned state, while the links read before stand)."""

    namespace: str
    ids: Sequence[str]

    def send(self, on: Capabilities) -> Any:
        if on.versioned is None:  # (asked for only when the state has a version)
            raise StateError(f"{type(on.state).__name__} cannot read its documents alone")
        return on.versioned.read_docs(self.namespace, self.ids)

    def asend(self, on: AsyncTarget) -> Any:
        raise StateError("an async rerank keeps no links: it reads them with the documents")


class PutImpression(NamedTuple):
    """Record an impression (see :meth:`~heaprank.state.base.StateBackend.put_impression`)."""

    impression: Impression
    feedback_id: str | None = None

    def send(self, on: Capabilities) -> Any:
        return on.state.put_impression(self.impression, feedback_id=self.feedback_id)

    def asend(self, on: AsyncTarget) -> Any:
        return on.twin.put_impression(self.impression, feedback_id=self.feedback_id)


class GetImpression(NamedTuple):
    """The impression of a recall, or None."""

    recall_id: str

    def send(self, on: Capabilities) -> Any:
        return on.state.get_impression(self.recall_id)

    def asend(self, on: AsyncTarget) -> Any:
        return on.twin.get_impression(self.recall_id)


class ApplyFeedback(NamedTuple):
    """Apply one feedback atomically."""

    batch: FeedbackBatch
    credit: CreditFn

    def send(self, on: Capabilities) -> Any:
        return on.state.apply_feedback(self.batch, self.credit)

    def asend(self, on: AsyncTarget) -> Any:
        return on.twin.apply_feedback(self.batch, self.credit)


StateRequest = Union[Read, ReadWithEdges, ReadDocs, PutImpression, GetImpression, ApplyFeedback]
