"""The compact binary form of an impression, shared by every backend.

An impression is what one rerank showed: per shown item its id, its feature *slots* (the crossed
``qt:`` features and ``doc:`` are rebuilt from them with :func:`~heaprank.scoring.features.expand_features`),
the signal values the ranking used, and the feedback verdict once it came. Stored as names it
took ~4 KB for ten items; this form takes ~35 bytes per item plus the ids' own bytes.

Layout (little-endian)::

    u8  format version (1)          u8  flags (1: time given by the caller, 2: doc features)
    u8  question type code          u16 n shown items
    u8  m signal columns            f64 time of the rerank
    u8[n]  verdict per item: 0 open, 1 used, 2 ignored, 3 outdated, 4 wrong
           (fixed offset 14: rewritten in place)
    u8[m]  signal column codes (SIGNAL_CODES)
    u8  k, then k x (varint length, UTF-8): slot strings outside the codebook
    n x (varint length, UTF-8 id, u8 slot count, slot codes: < 128 codebook, >= 128 table + 128)
    f32[n * m] signal values, row by row
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .._accel import kernels
from ..errors import StateError
from ..records import IGNORED, OPEN, OUTDATED, USED, WRONG, Impression
from ..scoring.features import FIXED_SLOTS
from ..scoring.query import QUESTION_TYPES

__all__ = ["IGNORED", "OPEN", "OUTDATED", "USED", "WRONG", "Head", "decode_impression",
           "encode_impression"]

FORMAT_VERSION = 1
VERDICT_OFFSET = 14

#: Signal columns an impression may carry, by code. Append only.
SIGNAL_CODES = ("relevance", "recency", "importance", "usefulness", "age_days", "rules",
                "reinforcement", "usefulness_sampled", "association")

_HEADER = struct.Struct("<BBBHBd")
_SLOT_CODE = {s: i for i, s in enumerate(FIXED_SLOTS)}
_QTYPE_CODE = {q: i for i, q in enumerate(QUESTION_TYPES)}
_SIGNAL_CODE = {s: i for i, s in enumerate(SIGNAL_CODES)}
_TABLE_BASE = 128
_NO_STRINGS = bytes(1)  # k = 0: no slot outside the codebook
_BIG_ENDIAN = sys.byteorder == "big"  # the stored floats are little-endian
assert len(FIXED_SLOTS) < _TABLE_BASE
_KERNELS = kernels("state")
#: ``_state.encode_items`` (an impression's items and values in one C pass), or None
encode_kernel = None if _KERNELS is None else _KERNELS.encode_items


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _utf8(text: str) -> bytes:
    encoded = text.encode("utf-8")
    n = len(encoded)
    return (_SMALL[n] if n < 128 else _varint(n)) + encoded


_SMALL = [bytes((n,)) for n in range(128)]  # one-byte lengths, prebuilt


# Rows made of codebook slots only (no caller data), both ways: their bytes, and back.
_FIXED_ROWS: dict[tuple[str, ...], bytes] = {}
_DECODED_ROWS: dict[bytes, tuple[str, ...]] = {}


class Head(NamedTuple):
    """What an impression's header says besides its items: the question type, the rerank's
    time (and whether the caller gave it), whether the rows end with ``doc:<id>``, and the
    names of its signal columns."""

    qtype: str
    time: float
    time_explicit: bool
    doc_features: bool
    signal_names: Sequence[str]


def _row_codes(row: Sequence[str], table: dict[str, int]) -> bytes:
    """A row's count byte and slot codes; free-form slots go to this impression's ``table``."""
    codes = bytearray((len(row),))
    free = False
    for slot in row:
        code = _SLOT_CODE.get(slot)
        if code is None:
            free = True
            code = table.get(slot)
            if code is None:
                code = table[slot] = _TABLE_BASE + len(table)
                if code > 255:
                    raise StateError("impression: more than 128 distinct free-form slots")
        codes.append(code)
    out = bytes(codes)
    # Kept by value for plain rows only: the kernel looks rows up, and a row of str subclasses
    # could run Python code mid-lookup.
    if not free and type(row) is tuple and all(type(slot) is str for slot in row) \
            and len(_FIXED_ROWS) < 65_536:
        _FIXED_ROWS[row] = out
    return out


def _own_rows(slots: Sequence[Sequence[str]], table: dict[str, int]) -> dict[tuple[str, ...], bytes] | None:
    """The codes of an impression's rows where some have free-form slots (coded in ``table``,
    as the Python pass codes them: in the order they first come), for ``encode_items``; None
    where a row is not a tuple (the Python pass then runs)."""
    own: dict[tuple[str, ...], bytes] = {}
    for row in slots:
        if type(row) is not tuple:
            return None
        if row not in own:
            own[row] = _FIXED_ROWS.get(row) or _row_codes(row, table)
    return own


def encode(head: Head, ids: Sequence[str], slots: Sequence[Sequence[str]],
           signals: np.ndarray | Sequence[Sequence[float]] | None,
           verdicts: Sequence[int] | None = None) -> bytes:
    """The stored form of one impression (see the module docstring): per shown item its id,
    its slots and its row of ``signals`` (None: zeros), and its verdict (None: open)."""
    n, m = len(ids), len(head.signal_names)
    wide = None if signals is None else np.asarray(signals, dtype=np.float64)
    if wide is not None and wide.shape != (n, m):
        raise ValueError(f"impression signals: expected shape {(n, m)}, got {wide.shape}")
    if encode_kernel is not None and wide is not None:
        made = encode_kernel(ids, slots, _FIXED_ROWS, wide, m)
        if made is not None:  # every row a codebook one: no free-form slot table
            return _head(head, n, verdicts, {}, made)
        table: dict[str, int] = {}
        own = _own_rows(slots, table)
        made = None if own is None else encode_kernel(ids, slots, own, wide, m)
        if made is not None:
            return _head(head, n, verdicts, table, made)
    table = {}
    body = bytearray()  # the items, then the signal values
    small, fixed = _SMALL, _FIXED_ROWS.get
    for doc_id, row in zip(ids, slots):
        encoded = doc_id.encode("utf-8")
        size = len(encoded)
        body += small[size] if size < 128 else _varint(size)
        body += encoded
        codes = fixed(row) if type(row) is tuple else None  # a codebook row, known by value
        body += _row_codes(row, table) if codes is None else codes
    if wide is None:
        body += bytes(4 * n * m)  # float32 zeros
    else:
        # An array's float items are the C cast numpy's astype("<f4") makes, bit for bit (a
        # value past float32's range becomes inf), without its overflow check and warning.
        values = array("f", wide.ravel().tolist())
        if _BIG_ENDIAN:
            values.byteswap()
        body += values
    return _head(head, n, verdicts, table, body)


def _head(head: Head, n: int, verdicts: Sequence[int] | None, table: dict[str, int],
          body: bytes | bytearray) -> bytes:
    """The stored impression: its header, verdicts, signal codes and free-form slots, then
    ``body`` (the items and signal values)."""
    flags = (1 if head.time_explicit else 0) | (2 if head.doc_features else 0)
    return b"".join((
        _HEADER.pack(FORMAT_VERSION, flags, _QTYPE_CODE[head.qtype], n, len(head.signal_names),
                     head.time),
        bytes(n) if verdicts is None else bytes(verdicts),
        bytes(map(_SIGNAL_CODE.__getitem__, head.signal_names)),
        bytes((len(table),)) + b"".join(map(_utf8, table)) if table else _NO_STRINGS,
        body))


def encode_impression(impression: Impression) -> bytes:
    """The stored form of ``impression``."""
    head = Head(impression.qtype, impression.time, impression.time_explicit,
                impression.doc_features, impression.signal_names)
    return encode(head, impression.ids, impression.slots,
                  impression.signals if len(impression.signals) else None,
                  impression.verdicts or None)


def decode_impression(recall_id: str, namespace: str, body: bytes) -> Impression:
    """The :class:`Impression` stored as ``body`` under ``recall_id`` in ``namespace``."""
    d = Decoded(body)
    return Impression(recall_id=recall_id, namespace=namespace, qtype=d.qtype, time=d.time,
                      time_explicit=d.time_explicit, ids=d.ids, slots=d.slots,
                      doc_features=d.doc_features, signal_names=d.signal_names,
                      signals=tuple(map(tuple, d.signals.tolist())), verdicts=d.verdicts)


class Decoded:
    """A stored impression read back: plain fields, features rebuilt on demand."""

    __slots__ = ("time_explicit", "doc_features", "qtype", "time", "verdicts", "signal_names",
                 "ids", "slots", "signals")

    def __init__(self, body: bytes) -> None:
        try:
            version, flags, qcode, n, m, self.time = _HEADER.unpack_from(body, 0)
            if version != FORMAT_VERSION:
                raise StateError(f"impression format {version} is not readable by this heaprank")
            self.time_explicit = bool(flags & 1)
            self.doc_features = bool(flags & 2)
            self.qtype = QUESTION_TYPES[qcode]
            pos = VERDICT_OFFSET
            self.verdicts = tuple(body[pos:pos + n])
            pos += n
            self.signal_names = tuple(SIGNAL_CODES[c] for c in body[pos:pos + m])
            pos += m
            k = body[pos]
            pos += 1
            table = []
            for _ in range(k):
                length, pos = _read_varint(body, pos)
                table.append(body[pos:pos + length].decode("utf-8"))
                pos += length
            ids: list[str] = []
            slots: list[tuple[str, ...]] = []
            fixed = FIXED_SLOTS
            for _ in range(n):
                length, pos = _read_varint(body, pos)
                ids.append(body[pos:pos + length].decode("utf-8"))
                pos += length
                count = body[pos]
                codes = body[pos + 1:pos + 1 + count]
                pos += 1 + count
                row = _DECODED_ROWS.get(codes)
                if row is None:
                    row = tuple(fixed[c] if c < _TABLE_BASE else table[c - _TABLE_BASE]
                                for c in codes)
                    if max(codes, default=0) < _TABLE_BASE and len(_DECODED_ROWS) < 65_536:
                        _DECODED_ROWS[bytes(codes)] = row
                slots.append(row)
            self.ids = tuple(ids)
            self.slots = tuple(slots)
            self.signals = np.frombuffer(body, dtype="<f4", count=n * m, offset=pos).reshape(n, m)
        except StateError:
            raise
        except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
            raise StateError(f"impression is unreadable: {type(exc).__name__}") from None


def verdicts_of(body: bytes) -> tuple[int, ...]:
    """The verdict bytes alone (what feedback needs to check idempotence)."""
    n = _HEADER.unpack_from(body, 0)[3]
    return tuple(body[VERDICT_OFFSET:VERDICT_OFFSET + n])


def with_verdicts(body: bytes, verdicts: Sequence[int]) -> bytes:
    """``body`` with its verdict bytes replaced."""
    n = len(verdicts)
    return body[:VERDICT_OFFSET] + bytes(verdicts) + body[VERDICT_OFFSET + n:]
