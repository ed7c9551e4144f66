"""A namespace's links in one Redis string: its pooled features' counts by interned id.

Every feature with pooled counts (not ``doc:<id>``) gets an id once per state (the id map
``P:{F}:ids``, name -> id; ``P:{F}:names`` back; both dropped when no namespace holds the
feature any more). A namespace's links are the entries of its features sorted by id.

Format 2 (written by heaprank 0.2): the byte ``0x01``, then per entry::

    varint((id - previous id) << 3 | wide << 2 | has pos << 1 | same neg), [pos], [neg]

each count a float32 when it is exactly one (small counts: sums of quarters, halves, whole
feedbacks), else (``wide``) a float64 for both: a count is kept exact to a double's 53 bits,
so one more feedback of fractional credit always moves it (float32 stopped moving a count of
~2 million by 0.1). ``neg`` is left out when it equals the previous entry's (links of the same
ignored items often share it): a link takes 1 to 9 bytes (17 when wide), plus one for a gap of
16 ids or more.

Format 1 (heaprank 0.1 and earlier 0.2 builds): no leading byte (its first byte is never 0x01: the first
id gap is at least 1, so the first varint is at least 4), ``varint(gap << 2 | has pos << 1 |
same neg)`` and float32 counts. Both are read; every write stores format 2, and ``heaprank
state migrate`` rewrites the strings still in format 1. ``doc:`` features stay a hash per
namespace (``P:{t}:e:<ns>``, name -> ``<dd>``). The Lua side (:data:`LUA`) reads and writes
the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
#: The first byte of a format-2 links string.
WIDE_FORMAT = 0x01

#: The Lua functions of the format, prepended to the scripts that use it.
LUA = """
local function f32(x) return (struct.unpack('<f', struct.pack('<f', x))) end
local function blob_decode(s)
  local ids, pos, neg = {}, {}, {}
  if not s or #s == 0 then return ids, pos, neg end
  local two = string.byte(s, 1) == 1
  local at, n, id, q = two and 2 or 1, #s, 0, 0
  local flags = two and 8 or 4
  while at <= n do
    local v, scale, b = 0, 1, 128
    while b >= 128 do
      b = string.byte(s, at); at = at + 1
      v = v + (b % 128) * scale; scale = scale * 128
    end
    id = id + math.floor(v / flags)
    local form = (two and math.floor(v / 4) % 2 == 1) and '<d' or '<f'
    local p = 0
    if math.floor(v / 2) % 2 == 1 then p, at = struct.unpack(form, s, at) end
    if v % 2 == 0 then q, at = struct.unpack(form, s, at) end
    ids[#ids + 1] = id; pos[id] = p; neg[id] = q
  end
  return ids, pos, neg
end
local function blob_encode(ids, pos, neg)
  table.sort(ids)
  local parts, prev, last = {string.char(1)}, 0, nil
  for _, id in ipairs(ids) do
    local p, q = pos[id], neg[id]
    local same = last ~= nil and q == last
    local wide = f32(p) ~= p or f32(q) ~= q
    local form = wide and '<d' or '<f'
    local v = (id - prev) * 8 + (wide and 4 or 0) + ((p ~= 0) and 2 or 0) + (same and 1 or 0)
    prev, last = id, q
    repeat
      local b = v % 128; v = math.floor(v / 128)
      if v > 0 then b = b + 128 end
      parts[#parts + 1] = string.char(b)
    until v == 0
    if p ~= 0 then parts[#parts + 1] = struct.pack(form, p) end
    if not same then parts[#parts + 1] = struct.pack(form, q) end
  end
  return table.concat(parts)
end
"""


def is_wide(blob: bytes | None) -> bool:
    """Whether a links string is in format 2 (an empty one needs no rewrite either)."""
    return not blob or blob[0] == WIDE_FORMAT


def decode(blob: bytes | None) -> dict[int, tuple[float, float]]:
    """A links string's entries (either format), id -> (pos, neg)."""
    out: dict[int, tuple[float, float]] = {}
    if not blob:
        return out
    two = blob[0] == WIDE_FORMAT
    at, end, ident, neg = int(two), len(blob), 0, 0.0
    shift_id = 3 if two else 2
    while at < end:
        value, shift = 0, 0
        while True:
            byte = blob[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        ident += value >> shift_id
        form = _F64 if two and value & 4 else _F32
        pos = 0.0
        if value & 2:
            (pos,) = form.unpack_from(blob, at)
            at += form.size
        if not value & 1:
            (neg,) = form.unpack_from(blob, at)
            at += form.size
        out[ident] = (pos, neg)
    return out


def _exact_f32(x: float) -> bool:
    try:
        return bool(_F32.unpack(_F32.pack(x))[0] == x)
    except OverflowError:  # past float32's range
        return False


def encode(entries: Iterable[tuple[int, float, float]], *, version: int = 2) -> bytes:
    """The links string of ``(id, pos, neg)`` entries, in format 2 (``version=1``: the float32
    format of earlier versions, which tests and migrations read back)."""
    if version not in (1, 2):
        raise ValueError(f"version: expected 1 or 2, got {version!r}")
    two = version == 2
    parts = bytearray([WIDE_FORMAT] if two else [])
    prev, last = 0, None
    for ident, pos, neg in sorted(entries):
        wide = two and not (_exact_f32(pos) and _exact_f32(neg))
        form = _F64 if wide else _F32
        pos, neg = form.unpack(form.pack(pos))[0], form.unpack(form.pack(neg))[0]
        has_pos = pos != 0
        same = neg == last
        flags = (wide << 2 | has_pos << 1 | same) if two else (has_pos << 1 | same)
        value = ((ident - prev) << (3 if two else 2)) | flags
        prev, last = ident, neg
        while value >= 0x80:
            parts.append((value & 0x7F) | 0x80)
            value >>= 7
        parts.append(value)
        if has_pos:
            parts += form.pack(pos)
        if not same:
            parts += form.pack(neg)
    return bytes(parts)
