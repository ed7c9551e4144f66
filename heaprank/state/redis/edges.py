"""Co-use edges in Redis: their key, how they are read, and the script that reads them with a
rerank's counts.

One hash per namespace, in the namespace's slot (``P:{t}:a:<ns>``, ``t`` its bucket): field
``<doc id>`` holds that document's edges as records ``<I4`` id length, the neighbour's id,
``<ddd`` (strength, count, last); each edge is stored under both of its documents. Field ``""``
(never a document id: ids are not blank) holds the namespace's edge count and the version the
edges are at, ``"<count>:<version>"`` (a bare count: version 0).

A feedback's change of the edges is worked out in Python by the one update rule
(:func:`heaprank.model.co_use.update`) from :func:`edge_state`'s read; the FEEDBACK script
writes it, in the same script as the feedback's counts, only while the edges are still at the
version it was worked out from (:mod:`.lua`).

Hooks in the backend:

- read (:func:`heaprank.state.redis.ops.read`): with edges wanted, ``READ_WITH_EDGES`` (one
  script on a server, :mod:`.lua`) or one more HMGET in the Cluster pipeline; :func:`edge_rows` turns the
  reply into :class:`EdgeRows`;
- ``RedisState.edge_state``: :func:`edge_state`;
- ``RedisState.forget_namespace``: :func:`key` is deleted with the namespace's other keys;
  ``RedisState.import_state`` writes :func:`adjacency`; ``RedisState.list_edges`` reads
  :func:`list_edges`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from ...model.co_use import among
from ...model.evidence import EdgeRows
from ...records import EdgeChange, EdgeState
from .layout import KeyLayout
from .wire import Command, Op

_LENGTH = struct.Struct("<I")
_ROW = struct.Struct("<ddd")

def key(layout: KeyLayout, namespace: str) -> str:
    """The adjacency hash of ``namespace``, in the namespace's slot."""
    return layout.ns_key("a", namespace)


def decode(value: bytes | None) -> dict[str, list[float]]:
    """One document's adjacency record, as ``{neighbour: [strength, count, last]}``."""
    out: dict[str, list[float]] = {}
    pos = 0
    while value and pos < len(value):
        (length,) = _LENGTH.unpack_from(value, pos)
        neighbour = value[pos + 4:pos + 4 + length].decode("utf-8")
        out[neighbour] = list(_ROW.unpack_from(value, pos + 4 + length))
        pos += 28 + length
    return out


def adjacency(rows: Sequence[tuple[str, str, float, float, float]]) -> dict[str, bytes]:
    """A namespace's edges ``(a, b, strength, count, last)`` as the fields of its adjacency hash
    (each edge under both documents, neighbours sorted, ``""`` the edge count): for state copy."""
    by_doc: dict[str, list[tuple[str, float, float, float]]] = {}
    for a, b, strength, count, last in rows:
        by_doc.setdefault(a, []).append((b, strength, count, last))
        by_doc.setdefault(b, []).append((a, strength, count, last))
    fields = {"": str(len(rows)).encode()}
    for doc, nbrs in by_doc.items():
        parts = []
        for b, strength, count, last in sorted(nbrs):
            encoded = b.encode("utf-8")
            parts += [_LENGTH.pack(len(encoded)), encoded, _ROW.pack(strength, count, last)]
        fields[doc] = b"".join(parts)
    return fields


def edge_rows(ids: Sequence[str], values: Sequence[bytes | None]) -> EdgeRows:
    """The edges among ``ids`` from their adjacency records (HMGET order)."""
    records = {d: decode(v) for d, v in zip(ids, values) if v}
    return among(ids, records.get)


def list_edges(layout: KeyLayout, namespace: str) -> Op:
    """Every edge of the namespace's adjacency hash, ``(a, b, strength, count, last)`` with
    ``a < b``, sorted (a flow: :mod:`.flow`)."""
    held = yield Command("hgetall", (key(layout, namespace),))
    rows = []
    for field, value in held.items():
        a = field.decode("utf-8")
        if a:
            rows += [(a, b, *row) for b, row in decode(value).items() if a < b]
    return sorted(rows)


def change_args(change: EdgeChange) -> list[Any]:
    """The FEEDBACK script's arguments of an edge change (see :mod:`.lua`)."""
    args: list[Any] = [change.version, change.total, len(change.deleted)]
    for a, b in change.deleted:
        args += [a, b]
    args.append(len(change.written))
    for a, b, strength, count, last in change.written:
        args += [a, b, repr(strength), repr(count), repr(last)]
    return args


def edge_state(layout: KeyLayout, namespace: str, docs: Sequence[str]) -> Op:
    """The edges of ``docs`` (each edge under both documents), their version and count (a
    flow: :mod:`.flow`)."""
    values = yield Command("hmget", (key(layout, namespace), ["", *docs]))
    held = (values[0] or b"0").decode()
    total, _, version = held.partition(":")
    adj: dict[str, dict[str, list[float]]] = {}
    for d, value in zip(docs, values[1:]):
        for b, row in decode(value).items():
            adj.setdefault(d, {})[b] = row
            adj.setdefault(b, {})[d] = row
    return EdgeState(int(version or 0), int(total), adj)
