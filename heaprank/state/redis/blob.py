"""A namespace's links in one Redis string: its pooled features' counts by interned id.

Every feature with pooled counts (not ``doc:<id>``) gets an id once per state (the id map
``P:{F}:ids``, name -> id; ``P:{F}:names`` back; both dropped when no namespace holds the
feature any more). A namespace's links are the entries of its features sorted by id::

    varint((id - previous id) << 2 | has pos << 1 | same neg), [f32 pos], [f32 neg]

``neg`` is left out when it equals the previous entry's (links of the same ignored items
often share it): a link takes 1 to 9 bytes, plus one for a gap of 32 ids or more. Counts are
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
  local at, n, id, q = 1, #s, 0, 0
  while at <= n do
    local v, scale, b = 0, 1, 128
    while b >= 128 do
      b = string.byte(s, at); at = at + 1
      v = v + (b % 128) * scale; scale = scale * 128
    end
    id = id + math.floor(v / 4)
    local p = 0
    if math.floor(v / 2) % 2 == 1 then p, at = struct.unpack('<f', s, at) end
    if v % 2 == 0 then q, at = struct.unpack('<f', s, at) end
    ids[#ids + 1] = id; pos[id] = p; neg[id] = q
  end
  return ids, pos, neg
end
local function blob_encode(ids, pos, neg)
  table.sort(ids)
  local parts, prev, last = {}, 0, nil
  for _, id in ipairs(ids) do
    local p, q = pos[id], neg[id]
    local same = last ~= nil and q == last
    local v = (id - prev) * 4 + ((p ~= 0) and 2 or 0) + (same and 1 or 0)
    prev, last = id, q
    repeat
      local b = v % 128; v = math.floor(v / 128)
      if v > 0 then b = b + 128 end
      parts[#parts + 1] = string.char(b)
    until v == 0
    if p ~= 0 then parts[#parts + 1] = struct.pack('<f', p) end
    if not same then parts[#parts + 1] = struct.pack('<f', q) end
  end
  return table.concat(parts)
end
"""


def decode(blob: bytes | None) -> dict[int, tuple[float, float]]:
    """A links string's entries, id -> (pos, neg)."""
    out: dict[int, tuple[float, float]] = {}
    if not blob:
        return out
    at, end, ident, neg = 0, len(blob), 0, 0.0
    while at < end:
        value, shift = 0, 0
        while True:
            byte = blob[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        ident += value >> 2
        pos = 0.0
        if value & 2:
            (pos,) = _F32.unpack_from(blob, at)
            at += 4
        if not value & 1:
            (neg,) = _F32.unpack_from(blob, at)
            at += 4
        out[ident] = (pos, neg)
    return out


def encode(entries: Iterable[tuple[int, float, float]]) -> bytes:
    """The links string of ``(id, pos, neg)`` entries."""
    parts = bytearray()
    prev, last = 0, None
    for ident, pos, neg in sorted(entries):
        has_pos = _F32.unpack(_F32.pack(pos))[0] != 0
        stored = _F32.unpack(_F32.pack(neg))[0]
        same = stored == last
        value = ((ident - prev) << 2) | (has_pos << 1) | same
        prev, last = ident, stored
        while value >= 0x80:
            parts.append((value & 0x7F) | 0x80)
            value >>= 7
        parts.append(value)
        if has_pos:
            parts += _F32.pack(pos)
        if not same:
            parts += _F32.pack(neg)
    return bytes(parts)
