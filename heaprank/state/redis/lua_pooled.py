"""The pooled layer's scripts for pushing outbox entries on one server and for moving the
pooled shards to another shard count (``heaprank state reshard``).

On one server a script may touch every shard, so both are atomic: an entry is applied to all
its shards and leaves its outbox in the same script (it is applied only while it is still
there, so a pusher that read it before another one pushed it applies nothing); an old shard's
rows reach their new shards, the old shard goes and ``P:meta`` records it in the same script.
In a Cluster the shards sit in other slots: an old shard is frozen (RESHARD_FREEZE: POOL_ADD
refuses it, HEAPRANK_FROZEN), copied (RESHARD_PUT, into each new shard's slot) and tombstoned
(RESHARD_TOMB: POOL_ADD says HEAPRANK_EPOCH, a reader sees version -1); see reshard.py.
"""

from __future__ import annotations

from .lua import _COMMON, GUARD

#: CRC-32 (zlib's) of a string, as Python's ``zlib.crc32`` gives it: the shard of a feature.
_CRC32 = """
local CRC = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if bit.band(c, 1) == 1 then c = bit.bxor(bit.rshift(c, 1), 0xEDB88320)
    else c = bit.rshift(c, 1) end
  end
  CRC[i] = c
end
local function crc32(s)
  local c = -1
  for i = 1, #s do
    c = bit.bxor(bit.rshift(c, 8), CRC[bit.band(bit.bxor(c, string.byte(s, i)), 255)])
  end
  c = bit.bnot(c)
  if c < 0 then c = c + 4294967296 end
  return c
end
"""

#: One server: push outbox entries, each applied to all its shards at once and deleted from its
#: outbox in the same script; an entry no longer in its outbox (pushed already) is skipped.
#: KEYS: the pooled shards, then the outboxes. ARGV: GUARD's two, n entries, then per entry: its
#: outbox (1-based index into KEYS), its id, n rows, then per row: its shard (index into
#: KEYS), name, id, and (pos, neg, namespaces) deltas. Returns the fields the shards dropped
#: (no namespace holds them) as {name, id, ...}.
POOL_PUSH_LOCAL = _COMMON + GUARD + """
local at, dropped = 2, {}
for e = 1, tonumber(ARGV[1]) do
  local box, id, m = KEYS[tonumber(ARGV[at])], ARGV[at + 1], tonumber(ARGV[at + 2])
  at = at + 3
  local groups = {}
  for _ = 1, m do
    local k = tonumber(ARGV[at])
    local g = groups[k] or {{}, {}, {}, {}, {}}
    groups[k] = g
    local j = #g[1] + 1
    g[1][j], g[2][j] = ARGV[at + 1], tonumber(ARGV[at + 2])
    g[3][j], g[4][j], g[5][j] = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5])
    at = at + 6
  end
  if redis.call('HDEL', box, id) == 1 then
    for k, g in pairs(groups) do
      for _, x in ipairs(pool_add(KEYS[k], g[1], g[3], g[4], g[5], g[2])) do
        dropped[#dropped + 1] = x
      end
    end
  end
end
return dropped
"""

#: Compare-and-set of ``P:meta``. KEYS: meta. ARGV: the value expected, the new one. Returns 1
#: if set.
META_SWAP = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""

#: One server: move one old pooled shard to the new shard set. KEYS: meta, the old shard, its
#: marker zset, then the N new shards. ARGV: the meta expected (this shard next to move), N,
#: the meta once moved. Rows are added to what a new shard holds (nothing, as no writer puts a
#: feature there before its old shard moved); each new shard written has its version bumped.
#: Returns {1, rows moved}, or {0, 0} when the meta is not the one expected (moved already).
RESHARD_MOVE = _COMMON + _CRC32 + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, 0} end
local n = tonumber(ARGV[2])
local flat = redis.call('HGETALL', KEYS[2])
local groups, moved = {}, 0
for j = 1, #flat, 2 do
  if flat[j] ~= '' then
    local t = 3 + crc32(flat[j]) % n + 1
    local g = groups[t] or {{}, {}}
    groups[t] = g
    g[1][#g[1] + 1] = flat[j]; g[2][#g[2] + 1] = flat[j + 1]
  end
end
for t, g in pairs(groups) do
  local held = hmget(KEYS[t], g[1])
  local out = {}
  for q = 1, #g[1] do
    local v = g[2][q]
    if held[q] then
      local p, c, h, id = struct.unpack('<dddd', v)
      local p2, c2, h2 = struct.unpack('<dddd', held[q])
      v = struct.pack('<dddd', p + p2, c + c2, h + h2, id)
    end
    out[#out + 1] = g[1][q]; out[#out + 1] = v
  end
  hset(KEYS[t], out)
  redis.call('HINCRBY', KEYS[t], '', 1)
  moved = moved + #g[1]
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('SET', KEYS[1], ARGV[3])
return {1, moved}
"""

#: A Cluster: freeze an old shard (its version "" becomes -2). KEYS: the shard. Returns -1 if
#: it was tombstoned already, else -2.
RESHARD_FREEZE = """
if redis.call('HGET', KEYS[1], '') == '-1' then return -1 end
redis.call('HSET', KEYS[1], '', -2)
return -2
"""

#: A Cluster: write rows and markers copied from frozen old shards into a new shard (rows set,
#: not added: nothing else writes them before the move is recorded; run twice, the same).
#: KEYS: the new shard, its marker zset. ARGV: the old shards' watermark, n rows, then n
#: (name, packed row) pairs, then (marker id, creation time) pairs.
RESHARD_PUT = _COMMON + """
local w, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local flat, marks = {}, {}
for j = 3, 2 + 2 * n do flat[#flat + 1] = ARGV[j] end
for j = 3 + 2 * n, #ARGV, 2 do marks[#marks + 1] = ARGV[j + 1]; marks[#marks + 1] = ARGV[j] end
if #flat > 0 then hset(KEYS[1], flat) end
for first = 1, #marks, 4000 do
  redis.call('ZADD', KEYS[2], unpack(marks, first, math.min(first + 3999, #marks)))
end
if w > tonumber(redis.call('ZSCORE', KEYS[2], '') or '-1') then
  redis.call('ZADD', KEYS[2], w, '')
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
end
redis.call('HINCRBY', KEYS[1], '', 1)
return n
"""

#: A Cluster: tombstone a copied old shard: its rows and markers go, its version "" is -1 (kept,
#: so a late pusher is told rather than writing to a key nobody reads). KEYS: shard, markers.
RESHARD_TOMB = """
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], '', -1)
return 1
"""
