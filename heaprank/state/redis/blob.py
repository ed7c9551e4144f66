"""A namespace's links in one Redis string: its pooled features' counts by interned id.

Every feature with pooled counts (not ``doc:<id>``) gets an id once per state (the id map
``P:{F}:ids``, name -> id; ``P:{F}:names`` back; both dropped when no namespace holds the
feature any more). A namespace's links are the entries of its features sorted by id::

    varint((id - previous id) << 1 | has pos), [f32 pos], f32 neg

so a link takes 5 bytes (neg only) or 9, plus one for a gap of 64 ids or more. Counts are
float32 (about 7 significant digits: a Beta posterior needs no more); the pooled layer keeps
doubles. ``doc:`` features stay a hash per namespace (``P:{t}:e:<ns>``, name -> ``<dd>``). The
Lua side (:data:`LUA`) reads and writes the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

_F32 = struct.Struct("<f")

#: The Lua functions of the format, prepended to the scripts that use it.
LUA = """
local function f32(x) return (struct.unpack('<f', struct.pack('<f', x))) end
local function blob_decode(s)
  local ids, pos, neg = {}, {}, {}
  if not s then return ids, pos, neg end
  local at, n, id = 1, #s, 0
  while at <= n do
    local v, scale, b = 0, 1, 128
    while b >= 128 do
      b = string.byte(s, at); at = at + 1
      v = v + (b % 128) * scale; scale = scale * 128
    end
    id = id + math.floor(v / 2)
    local p = 0
    if v % 2 == 1 then p, at = struct.unpack('<f', s, at) end
    local q
    q, at = struct.unpack('<f', s, at)
    ids[#ids + 1] = id; pos[id] = p; neg[id] = q
  end
  return ids, pos, neg
end
local function blob_encode(ids, pos, neg)
  table.sort(ids)
  local parts, prev = {}, 0
  for _, id in ipairs(ids) do
    local p = pos[id]
    local v = (id - prev) * 2 + ((p ~= 0) and 1 or 0)
    prev = id
    repeat
      local b = v % 128; v = math.floor(v / 128)
      if v > 0 then b = b + 128 end
      parts[#parts + 1] = string.char(b)
    until v == 0
    if p ~= 0 then parts[#parts + 1] = struct.pack('<f', p) end
    parts[#parts + 1] = struct.pack('<f', neg[id])
  end
  return table.concat(parts)
end
"""


def decode(blob: bytes | None) -> dict[int, tuple[float, float]]:
    """A links string's entries, id -> (pos, neg)."""
    out: dict[int, tuple[float, float]] = {}
    if not blob:
        return out
    at, end, ident = 0, len(blob), 0
    while at < end:
        value, shift = 0, 0
        while True:
            byte = blob[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        ident += value >> 1
        pos = 0.0
        if value & 1:
            (pos,) = _F32.unpack_from(blob, at)
            at += 4
        (neg,) = _F32.unpack_from(blob, at)
        at += 4
        out[ident] = (pos, neg)
    return out


def encode(entries: Iterable[tuple[int, float, float]]) -> bytes:
    """The links string of ``(id, pos, neg)`` entries."""
    parts = bytearray()
    prev = 0
    for ident, pos, neg in sorted(entries):
        has_pos = _F32.unpack(_F32.pack(pos))[0] != 0
        value = ((ident - prev) << 1) | has_pos
        prev = ident
        while value >= 0x80:
            parts.append((value & 0x7F) | 0x80)
            value >>= 7
        parts.append(value)
        if has_pos:
            parts += _F32.pack(pos)
        parts += _F32.pack(neg)
    return bytes(parts)
