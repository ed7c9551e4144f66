"""Move a learned state between backends (``heaprank state copy SRC DST``).

What is copied: every namespace's links, used documents and co-use edges, the global layer as it stands
(including evidence a forgotten namespace left in it without ``scrub_global``), every live
impression with its verdicts, the feedback count and the fitted weights' record (as it stands,
version included). Explicit feedback ids are not copied: they
only let a caller's retry find its impression again, for minutes. The target must be empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import StateError
from .base import StateBackend
from .capabilities import EdgeBackend

Links = tuple[list[str], np.ndarray, np.ndarray]


@dataclass(eq=False)
class StateDump:
    """A whole state in plain values: what :func:`copy_state` moves.

    Attributes:
        global_links: The pooled layer ``(features, pos, neg)``.
        links: Namespace -> its links ``(features, pos, neg)``.
        docs: Namespace -> ``(id, last_used, use_count)`` of each used document.
        edges: Namespace -> ``(a, b, strength, count, last)`` of each co-use edge.
        impressions: ``(recall_id, namespace, codec bytes)`` of each live impression.
        feedbacks: Feedbacks applied so far.
    """

    global_links: Links
    links: dict[str, Links] = field(default_factory=dict)
    docs: dict[str, list[tuple[str, float, float]]] = field(default_factory=dict)
    edges: dict[str, list[tuple[str, str, float, float, float]]] = field(default_factory=dict)
    impressions: list[tuple[str, str, bytes]] = field(default_factory=list)
    feedbacks: int = 0

    def holders(self) -> dict[str, int]:
        """Feature -> how many namespaces hold a link of it."""
        count: dict[str, int] = {}
        for features, _, _ in self.links.values():
            for f in features:
                count[f] = count.get(f, 0) + 1
        return count


class Exportable(Protocol):
    """A backend ``state copy`` can read from."""

    def iter_docs(self, namespace: str) -> Sequence[tuple[str, float, float]]: ...

    def iter_impressions(self) -> Sequence[tuple[str, str, bytes]]: ...


class Importable(Protocol):
    """A backend ``state copy`` can write to (empty)."""

    def import_state(self, dump: StateDump) -> None: ...


def export_state(state: StateBackend) -> StateDump:
    """Read a whole state."""
    source: Any = state
    if not hasattr(source, "iter_docs") or not hasattr(source, "iter_impressions"):
        raise StateError(f"state copy: {state!r} cannot be read whole")
    names = state.namespaces()
    return StateDump(global_links=state.list_links(None),
                     links={ns: state.list_links(ns) for ns in names},
                     docs={ns: list(source.iter_docs(ns)) for ns in names},
                     edges={ns: edges for ns in names if isinstance(state, EdgeBackend)
                            and (edges := state.list_edges(ns))},
                     impressions=list(source.iter_impressions()),
                     feedbacks=int(state.stats()["feedbacks"]))


def copy_state(source: StateBackend, target: StateBackend) -> dict[str, int]:
    """Copy ``source`` into the empty ``target``; returns the target's stats afterwards.

    Raises:
        StateError: the target holds something already, or a backend cannot be copied.
    """
    sink: Any = target
    if not hasattr(sink, "import_state"):
        raise StateError(f"state copy: cannot write into {target!r}")
    if any(v for k, v in target.stats().items() if not k.startswith("max_")):  # (not its caps)
        raise StateError(f"state copy: the target {target!r} is not empty")
    sink.import_state(export_state(source))
    _copy_weights(source, target)
    return target.stats()


def _copy_weights(source: StateBackend, target: StateBackend) -> None:
    """The fitted weights' record (:mod:`heaprank.state.weights`), if the source has one."""
    from .weights import record_version, weight_store

    src, dst = weight_store(source), weight_store(target)
    record = None if src is None else src.read_weights()
    if record is not None and dst is not None:
        dst.swap_weights(0, record_version(record), record)
