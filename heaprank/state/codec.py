"""The compact binary form of an impression, shared by every backend.

An impression is what one rerank showed: per shown item its id, its feature *slots* (the crossed
``qt:`` features and ``doc:`` are rebuilt from them with :func:`~heaprank.model.features.expand_features`),
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

Format 2 (:func:`encode_compact`, what the Redis backend stores, where memory is the bill) has
the same header, verdicts, signal codes and slot strings, then::

    n x (varint bytes shared with the previous id, varint length, UTF-8 rest, u8 slot count,
         slot codes)
    u16 columns holding one value for every item, u16 columns kept as float32
    per signal column, in order: one value if it is constant, else n; float16, or float32
    where a value would lose precision as float16 (a finite non-zero magnitude outside
    [2**-14, 65504])

Format 3 (what :func:`encode_compact` writes now) stores the same header, verdicts, signal
codes, slot strings and values as format 2, the items by column::

    n x (varint bytes shared with the previous id, varint length, UTF-8 rest)
    u8  slots per item c, the same for every item (255: they differ, and n rows follow as in
        format 2: u8 slot count, slot codes)
    varint  mask of the slot columns holding one code for every item
    per slot column, in order: its code once if it is constant, else n codes

float16 keeps every value it stores to a relative error of 2**-11 (~0.05%): enough for what
reads stored values back (tuning, re-fitting, replay), which fit smooth functions of them over
thousands of impressions; a live ranking never reads them. Every format is read back alike.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..errors import StateError
from ..model.features import FIXED_SLOTS
from ..model.questions import QUESTION_TYPES
from ..model.signals import SIGNALS
from ..records import IGNORED, OPEN, OUTDATED, USED, WRONG, Impression

__all__ = ["IGNORED", "OPEN", "OUTDATED", "USED", "WRONG", "Head", "decode_impression",
           "encode_compact", "encode_impression"]

FORMAT_VERSION = 1
#: The compact format of :func:`encode_compact`, and the earlier one it still reads
COMPACT_VERSION = 3
COMPACT_ROWS_VERSION = 2
_ROWS_DIFFER = 255
VERDICT_OFFSET = 14
#: float16's largest finite value and smallest normal one (below it, precision is lost)
_F16_MAX = 65504.0
_F16_MIN_NORMAL = 2.0 ** -14

#: The columns an impression may carry besides the declared signals' (which carry their own
#: codes, heaprank/model/signals.py), by code. Codes are append only, never reused.
_OTHER_CODES = {"age_days": 4, "rules": 5, "usefulness_sampled": 7}
_BY_CODE = {**{s.code: s.name for s in SIGNALS}, **{c: n for n, c in _OTHER_CODES.items()}}
assert len(_BY_CODE) == len(SIGNALS) + len(_OTHER_CODES), "two columns share an impression code"
#: Every column an impression may carry, at the index of its code.
SIGNAL_CODES = tuple(_BY_CODE[c] for c in range(len(_BY_CODE)))

_HEADER = struct.Struct("<BBBHBd")
_SLOT_CODE = {s: i for i, s in enumerate(FIXED_SLOTS)}
_QTYPE_CODE = {q: i for i, q in enumerate(QUESTION_TYPES)}
_SIGNAL_CODE = {s: i for i, s in enumerate(SIGNAL_CODES)}
_TABLE_BASE = 128
_NO_STRINGS = bytes(1)  # k = 0: no slot outside the codebook
_BIG_ENDIAN = sys.byteorder == "big"  # the stored floats are little-endian
assert len(FIXED_SLOTS) < _TABLE_BASE


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
    # Kept by value for plain rows only (a row of str subclasses could hash as it likes).
    if not free and type(row) is tuple and all(type(slot) is str for slot in row) \
            and len(_FIXED_ROWS) < 65_536:
        _FIXED_ROWS[row] = out
    return out


def encode(head: Head, ids: Sequence[str], slots: Sequence[Sequence[str]],
           signals: np.ndarray | Sequence[Sequence[float]] | None,
           verdicts: Sequence[int] | None = None) -> bytes:
    """The stored form of one impression (see the module docstring): per shown item its id,
    its slots and its row of ``signals`` (None: zeros), and its verdict (None: open)."""
    n, m = len(ids), len(head.signal_names)
    wide = None if signals is None else np.asarray(signals, dtype=np.float64)
    if wide is not None and wide.shape != (n, m):
        raise ValueError(f"impression signals: expected shape {(n, m)}, got {wide.shape}")
    table: dict[str, int] = {}
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
          body: bytes | bytearray, version: int = FORMAT_VERSION) -> bytes:
    """The stored impression: its header, verdicts, signal codes and free-form slots, then
    ``body`` (the items and signal values)."""
    flags = (1 if head.time_explicit else 0) | (2 if head.doc_features else 0)
    return b"".join((
        _HEADER.pack(version, flags, _QTYPE_CODE[head.qtype], n, len(head.signal_names),
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


def encode_compact(impression: Impression, version: int = COMPACT_VERSION) -> bytes:
    """``impression`` in format 3 (see the module docstring; ``version=2``: format 2): ids
    share their prefix with the item before, a slot column or a signal column with one value
    for every item stores it once, and values are float16 where that keeps their precision."""
    head = Head(impression.qtype, impression.time, impression.time_explicit,
                impression.doc_features, impression.signal_names)
    n, m = len(impression.ids), len(head.signal_names)
    values = np.ascontiguousarray(impression.signals if len(impression.signals)
                                  else np.zeros((n, m)), dtype=np.float64).reshape(n, m)
    table: dict[str, int] = {}
    rows = [_row_codes(row, table) for row in impression.slots]
    body = bytearray()
    previous = b""
    for j, doc_id in enumerate(impression.ids):
        encoded = doc_id.encode("utf-8")
        shared = _shared_prefix(previous, encoded)
        body += _varint(shared) + _varint(len(encoded) - shared) + encoded[shared:]
        if version == COMPACT_ROWS_VERSION:
            body += rows[j]
        previous = encoded
    if version != COMPACT_ROWS_VERSION:
        body += _slot_columns(rows)
    body += _compact_values(values)
    return _head(head, n, impression.verdicts or None, table, body, version)


def _slot_columns(rows: list[bytes]) -> bytes:
    """Format 3's slots: the rows' common length, the mask of constant columns, the columns
    (rows of several lengths: 255, then the rows)."""
    width = rows[0][0] if rows else 0
    if width >= _ROWS_DIFFER or any(row[0] != width for row in rows):
        return bytes((_ROWS_DIFFER,)) + b"".join(rows)
    columns = [bytes(row[1 + q] for row in rows) for q in range(width)]
    constant = [len(set(column)) == 1 for column in columns]
    return b"".join((bytes((width,)), _varint(sum(1 << q for q, c in enumerate(constant) if c)),
                     *(column[:1] if c else column for column, c in zip(columns, constant))))


def _read_slot_columns(body: bytes, pos: int, n: int) -> tuple[list[bytes], int]:
    """The n rows of slot codes of a format 3 body, from ``pos`` -> ``(rows, next pos)``."""
    width = body[pos]
    pos += 1
    if width == _ROWS_DIFFER:
        rows = []
        for _ in range(n):
            count = body[pos]
            rows.append(body[pos + 1:pos + 1 + count])
            pos += 1 + count
        return rows, pos
    constant, pos = _read_varint(body, pos)
    columns = []
    for q in range(width):
        count = 1 if constant >> q & 1 else n
        column = body[pos:pos + count]
        if len(column) != count:
            raise ValueError("slot column past the end")
        columns.append(column * n if count == 1 else column)
        pos += count
    return [bytes(column[j] for column in columns) for j in range(n)], pos


def _shared_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes ``a`` and ``b`` share."""
    limit = min(len(a), len(b))
    k = 0
    while k < limit and a[k] == b[k]:
        k += 1
    return k


def _compact_values(values: np.ndarray) -> bytes:
    """The signal values of format 2: the two column masks, then each column's value(s)."""
    n, m = values.shape
    bits = values.view(np.uint64)
    constant = (bits == bits[:1]).all(axis=0) if n else np.zeros(m, dtype=bool)
    size = np.abs(values)
    with np.errstate(invalid="ignore"):
        lossy = (np.isfinite(size) & (size != 0)
                 & ((size > _F16_MAX) | (size < _F16_MIN_NORMAL))).any(axis=0)
    out = bytearray(struct.pack("<HH", _mask(constant), _mask(lossy)))
    for j in range(m):
        column = values[:1, j] if constant[j] else values[:, j]
        with np.errstate(over="ignore"):  # past float32's range: inf, as format 1 keeps it
            out += column.astype("<f4" if lossy[j] else "<f2").tobytes()
    return bytes(out)


def _mask(flags: np.ndarray) -> int:
    return sum(1 << j for j in np.flatnonzero(flags).tolist())


def _read_values(body: bytes, pos: int, n: int, m: int) -> np.ndarray:
    """The ``(n, m)`` signal values of a format 2 body, from ``pos``."""
    constant, lossy = struct.unpack_from("<HH", body, pos)
    pos += 4
    out = np.empty((n, m))
    for j in range(m):
        wide = lossy >> j & 1
        count = 1 if constant >> j & 1 else n
        out[:, j] = np.frombuffer(body, dtype="<f4" if wide else "<f2", count=count, offset=pos)
        pos += count * (4 if wide else 2)
    return out


def decode_impression(recall_id: str, namespace: str, body: bytes) -> Impression:
    """The :class:`Impression` stored as ``body`` under ``recall_id`` in ``namespace``."""
    d = Decoded(body)
    return Impression(recall_id=recall_id, namespace=namespace, qtype=d.qtype, time=d.time,
                      time_explicit=d.time_explicit, ids=d.ids, slots=d.slots,
                      doc_features=d.doc_features, signal_names=d.signal_names,
                      signals=tuple(map(tuple, d.signals.tolist())), verdicts=d.verdicts)


def _read_items(body: bytes, pos: int, n: int, version: int) -> tuple[list[str], list[bytes], int]:
    """The ids and the rows of slot codes of a body's n items, from ``pos`` -> ``(ids, rows,
    next pos)``: per item its id then its row (formats 1, 2), or the ids then the slot columns
    (format 3)."""
    ids: list[str] = []
    rows: list[bytes] = []
    previous = b""
    for _ in range(n):
        if version != FORMAT_VERSION:  # the bytes shared with the id before, then the rest
            shared, pos = _read_varint(body, pos)
            length, pos = _read_varint(body, pos)
            if shared > len(previous):
                raise ValueError("shared prefix past the previous id")
            previous = previous[:shared] + body[pos:pos + length]
            ids.append(previous.decode("utf-8"))
        else:
            length, pos = _read_varint(body, pos)
            ids.append(body[pos:pos + length].decode("utf-8"))
        pos += length
        if version != COMPACT_VERSION:
            count = body[pos]
            rows.append(body[pos + 1:pos + 1 + count])
            pos += 1 + count
    if version == COMPACT_VERSION:
        rows, pos = _read_slot_columns(body, pos, n)
    return ids, rows, pos


def _slot_row(codes: bytes, table: list[str]) -> tuple[str, ...]:
    """The slots a row of codes names (codebook rows kept, as the encoder keeps them)."""
    row = _DECODED_ROWS.get(codes)
    if row is None:
        fixed = FIXED_SLOTS
        row = tuple(fixed[c] if c < _TABLE_BASE else table[c - _TABLE_BASE] for c in codes)
        if max(codes, default=0) < _TABLE_BASE and len(_DECODED_ROWS) < 65_536:
            _DECODED_ROWS[bytes(codes)] = row
    return row


class Decoded:
    """A stored impression read back: plain fields, features rebuilt on demand."""

    __slots__ = ("time_explicit", "doc_features", "qtype", "time", "verdicts", "signal_names",
                 "ids", "slots", "signals")

    def __init__(self, body: bytes) -> None:
        try:
            version, flags, qcode, n, m, self.time = _HEADER.unpack_from(body, 0)
            if version not in (FORMAT_VERSION, COMPACT_ROWS_VERSION, COMPACT_VERSION):
                raise StateError(f"impression format {version} is not readable by this heaprank")
            compact = version != FORMAT_VERSION
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
            ids, rows, pos = _read_items(body, pos, n, version)
            slots = [_slot_row(codes, table) for codes in rows]
            self.ids = tuple(ids)
            self.slots = tuple(slots)
            self.signals = _read_values(body, pos, n, m) if compact else np.frombuffer(
                body, dtype="<f4", count=n * m, offset=pos).reshape(n, m)
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
