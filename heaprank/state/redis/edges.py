"""Co-use edges in Redis: their key, their Lua, and the hooks the Redis backend calls.

One hash per namespace, in the namespace's slot (``P:{t}:a:<ns>``, ``t`` its bucket): field ``<doc id>`` holds
that document's edges as records ``<I4`` id length, the neighbour's id, ``<ddd`` (strength,
count, last); each edge is stored under both of its documents. Field ``""`` (never a document id:
ids are not blank) holds the namespace's edge count.

The scripts wrap the backend's own scripts without changing them: the base script's text becomes
the body of a local function, called first; the co-use part runs after it, in the same script,
so a feedback's links and edges are applied together or not at all, and the edges are formed
only from the items the base script newly applied (a retry forms none). The update rule is the
one of :mod:`heaprank.state.edges`, in Lua.

Hooks in the backend:

- read (:func:`heaprank.state.redis.ops.read`, both clients): with edges wanted,
  ``READ_WITH_EDGES`` (one script on a server) or one more HMGET in the Cluster pipeline;
  :func:`edge_rows` turns the reply into :class:`EdgeRows`;
- feedback (:func:`heaprank.state.redis.ops.feedback`, both clients): with ``batch.co_use``,
  ``FEEDBACK_WITH_CO_USE`` and :func:`feedback_extra`'s key and arguments appended;
- ``RedisState.forget_namespace``: :func:`key` is deleted with the namespace's other keys;
  ``RedisState.import_state`` writes :func:`adjacency`; ``RedisState.list_edges`` reads
  :func:`list_edges`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from ...records import FeedbackBatch
from ..edges import EdgeRows, among
from . import lua as redis_lua
from .layout import KeyLayout

_LENGTH = struct.Struct("<I")
_ROW = struct.Struct("<ddd")

#: The co-use update of :mod:`heaprank.state.edges` in Lua. Reads its settings from the last
#: ARGV block (see :func:`feedback_extra`), the adjacency hash from the last KEY.
_CO_USE = """
local function co_use_update(applied, adj_key)
  local m = tonumber(ARGV[#ARGV])
  local at = #ARGV - m
  local function nextarg() local v = ARGV[at]; at = at + 1; return v end
  local rate, ltp, half_life = tonumber(nextarg()), tonumber(nextarg()), tonumber(nextarg())
  local slowdown, floor = tonumber(nextarg()), tonumber(nextarg())
  local max_edges, max_per_doc = tonumber(nextarg()), tonumber(nextarg())
  local evict_to, max_rank, now = tonumber(nextarg()), tonumber(nextarg()), tonumber(nextarg())
  local n_items = tonumber(nextarg())
  local rank_of, used_of = {}, {}
  for i = 1, n_items do rank_of[i] = tonumber(nextarg()); used_of[i] = nextarg() == '1' end
  local n_shown = tonumber(nextarg())
  local shown = {}
  for r = 1, n_shown do shown[r] = nextarg() end
  local body  -- (a minted recall id's impression is a field of the fed hour's hash)
  if #ARGV[12] == 20 then body = redis.call('HGET', KEYS[7], ARGV[12])
  else body = redis.call('GET', KEYS[1]) end
  local new, used = {}, {}
  for _, i in ipairs(applied) do
    local r = rank_of[i + 1]
    if used_of[i + 1] and r <= max_rank and r <= n_shown then new[#new + 1] = r end
  end
  if #new == 0 then return end
  for r = 1, n_shown do
    if string.byte(body, 14 + r) == 1 then used[#used + 1] = r end
  end
  local seen, pairs_ = {}, {}
  for _, x in ipairs(new) do
    for _, y in ipairs(used) do
      local a, b = shown[x], shown[y]
      if a ~= b then
        if b < a then a, b = b, a end
        local k = a .. '\\0' .. b
        if not seen[k] then seen[k] = true; pairs_[#pairs_ + 1] = {a, b} end
      end
    end
  end
  table.sort(pairs_, function(p, q) if p[1] ~= q[1] then return p[1] < q[1] end return p[2] < q[2] end)

  local cache, dirty = {}, {}
  local function decode(v)
    local out = {}
    if not v then return out end
    local pos = 1
    while pos <= #v do
      local len = struct.unpack('<I4', v, pos)
      local id = string.sub(v, pos + 4, pos + 3 + len)
      local s, c, t = struct.unpack('<ddd', v, pos + 4 + len)
      out[id] = {s, c, t}
      pos = pos + 28 + len
    end
    return out
  end
  local function load(d)
    if cache[d] == nil then cache[d] = decode(redis.call('HGET', adj_key, d)) end
    return cache[d]
  end
  local function decayed(r)
    local h = half_life * ((r[2] >= ltp) and slowdown or (1 + r[1]))
    return r[1] * 2 ^ (-math.max(now - r[3], 0) / h)
  end
  local function drop(a, b)
    load(a)[b] = nil; load(b)[a] = nil
    dirty[a] = true; dirty[b] = true
  end
  local count = tonumber(redis.call('HGET', adj_key, '') or '0')
  local touched, docs = {}, {}
  for _, p in ipairs(pairs_) do
    local a, b = p[1], p[2]
    local row = load(a)[b]
    if row == nil then row = {0, 0, now}; count = count + 1 end
    local s = decayed(row)
    row = {s + rate * (1 - s), row[2] + 1, math.max(row[3], now)}
    load(a)[b] = row; load(b)[a] = row
    dirty[a] = true; dirty[b] = true
    for _, d in ipairs(p) do
      if not touched[d] then touched[d] = true; docs[#docs + 1] = d end
    end
  end
  table.sort(docs)
  for _, d in ipairs(docs) do
    local strength, weak, kept, n = {}, {}, {}, 0
    for b, row in pairs(load(d)) do
      n = n + 1
      strength[b] = decayed(row)
      if strength[b] < floor then weak[#weak + 1] = b else kept[#kept + 1] = b end
    end
    local excess = n - #weak - max_per_doc
    if excess > 0 then
      table.sort(kept, function(x, y)
        if strength[x] ~= strength[y] then return strength[x] < strength[y] end
        return x < y end)
      for k = 1, excess do weak[#weak + 1] = kept[k] end
    end
    for _, b in ipairs(weak) do drop(d, b); count = count - 1 end
  end
  if count > max_edges then
    local all = redis.call('HGETALL', adj_key)
    for k = 1, #all, 2 do
      if all[k] ~= '' and cache[all[k]] == nil then cache[all[k]] = decode(all[k + 1]) end
    end
    local ranked = {}
    for a, nbrs in pairs(cache) do
      for b, row in pairs(nbrs) do
        if a < b then ranked[#ranked + 1] = {decayed(row), a, b} end
      end
    end
    table.sort(ranked, function(p, q)
      if p[1] ~= q[1] then return p[1] < q[1] end
      if p[2] ~= q[2] then return p[2] < q[2] end
      return p[3] < q[3] end)
    for k = 1, count - evict_to do drop(ranked[k][2], ranked[k][3]) end
    count = math.min(count, evict_to)
  end
  for d in pairs(dirty) do
    local ids = {}
    for b in pairs(cache[d]) do ids[#ids + 1] = b end
    if #ids == 0 then
      redis.call('HDEL', adj_key, d)
    else
      table.sort(ids)
      local parts = {}
      for k, b in ipairs(ids) do
        local r = cache[d][b]
        parts[k] = struct.pack('<I4', #b) .. b .. struct.pack('<ddd', r[1], r[2], r[3])
      end
      redis.call('HSET', adj_key, d, table.concat(parts))
    end
  end
  redis.call('HSET', adj_key, '', count)
end
"""


def _wrap(base: str, before: str, after: str) -> str:
    """``base`` (a whole script) as the body of ``local function base_script()``, between
    ``before`` and ``after``: the base text runs unchanged."""
    return f"{before}\nlocal function base_script()\n{base}\nend\n{after}"


#: One server: READ_LOCAL, then the adjacency of every document read, as a fourth reply entry.
#: KEYS: READ_LOCAL's, then the adjacency hash (hidden from READ_LOCAL).
READ_WITH_EDGES = _wrap(redis_lua.READ_LOCAL, """
local adj_key = KEYS[#KEYS]
local KEYS = {unpack(KEYS, 1, #KEYS - 1)}""", """
local reply = base_script()
if reply.err then return reply end  -- (GUARD's: the layout moved on)
local nf = tonumber(ARGV[1])
local ids = {}
for j = 1, tonumber(ARGV[nf + 2]) do ids[j] = ARGV[nf + 2 + j] end
if #ids > 0 then reply[4] = redis.call('HMGET', adj_key, unpack(ids)) else reply[4] = {} end
return reply""")

#: FEEDBACK, then the co-use update of what it newly applied. KEYS: FEEDBACK's, then the
#: adjacency hash. ARGV: FEEDBACK's, then :func:`feedback_extra`'s block.
FEEDBACK_WITH_CO_USE = _wrap(redis_lua.FEEDBACK, _CO_USE, """
local reply = base_script()
if reply.err == nil and #reply[1] > 0 then co_use_update(reply[1], KEYS[#KEYS]) end
return reply""")


def key(layout: KeyLayout, namespace: str) -> str:
    """The adjacency hash of ``namespace``, in the namespace's slot."""
    return layout.ns_key("a", namespace)


def feedback_extra(batch: FeedbackBatch) -> list[Any]:
    """The ARGV block ``FEEDBACK_WITH_CO_USE`` reads after FEEDBACK's own arguments: the
    settings, each item's rank and verdict, the shown ids up to ``max_rank``, and its length."""
    co_use = batch.co_use
    assert co_use is not None
    block: list[Any] = [repr(float(v)) for v in (
        co_use.rate, co_use.ltp_threshold, co_use.half_life_s, co_use.ltp_slowdown, co_use.floor,
        co_use.max_edges, co_use.max_per_doc, co_use.evict_to, co_use.max_rank, batch.time)]
    block.append(len(batch.items))
    for item in batch.items:
        block += [item.rank, "1" if item.used else "0"]
    shown = batch.shown[:co_use.max_rank]
    block += [len(shown), *shown]
    return block + [len(block)]


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


def list_edges(client: Any, adj_key: str) -> list[tuple[str, str, float, float, float]]:
    """Every edge of one adjacency hash, ``(a, b, strength, count, last)`` with ``a < b``."""
    rows = []
    for field, value in client.hgetall(adj_key).items():
        a = field.decode("utf-8")
        if a:
            rows += [(a, b, *row) for b, row in decode(value).items() if a < b]
    return sorted(rows)  # type: ignore[arg-type]
