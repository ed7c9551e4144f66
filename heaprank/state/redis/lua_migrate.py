"""The Lua script of ``heaprank state migrate`` (:mod:`.migrate`), on the helpers of
:mod:`.lua`."""

from __future__ import annotations

from .lua import _COMMON

#: ``heaprank state migrate`` (:mod:`.migrate`): merge one layout-1 namespace's old keys into
#: its new ones. KEYS: new links, new docs, the bucket's namespace hash (twice: its field ""
#: is the bucket's feedback count), the migration's marker hash, new explicit ids, new co-use
#: edges,
#: new document features. ARGV: namespace, n links, n docs, n explicit ids, n edge fields, then
#: the links as (name, id (0: a document feature), <dd>), the others as flat (field, value)
#: lists in that order, then the explicit ids' expiry (ms, 0: none). Returns the pooled
#: features the namespace held already (written since), or "done".
#: ``heaprank state migrate``: rewrite a namespace's links string of format 1 (float32
#: counts) in format 2 (:mod:`.blob`), unless a writer did so meanwhile. KEYS: the links
#: string. Returns 1 if rewritten, else 0.
WIDEN_LINKS = _COMMON + """
local s = redis.call('GET', KEYS[1])
if not s or #s == 0 or string.byte(s, 1) == 1 then return 0 end
local ids, pos, neg = blob_decode(s)
redis.call('SET', KEYS[1], blob_encode(ids, pos, neg), 'KEEPTTL')
return 1
"""

MIGRATE_NS = _COMMON + """
if redis.call('HEXISTS', KEYS[5], ARGV[1]) == 1 then return 'done' end
local counts = {tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])}
local at = 6
local held = {}
local bids, bpos, bneg = blob_decode(redis.call('GET', KEYS[1]))
for j = 1, counts[1] do
  local f, id, v = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2]; at = at + 3
  local p, n = struct.unpack('<dd', v)
  if id == 0 then
    local now = redis.call('HGET', KEYS[8], f)
    if now then local p2, n2 = struct.unpack('<dd', now); p, n = p + p2, n + n2 end
    redis.call('HSET', KEYS[8], f, struct.pack('<dd', p, n))
  else
    if bneg[id] then
      p, n = p + bpos[id], n + bneg[id]; held[#held + 1] = f
    else
      bids[#bids + 1] = id
    end
    bpos[id], bneg[id] = p, n
  end
end
if #bids > 0 then redis.call('SET', KEYS[1], blob_encode(bids, bpos, bneg)) end
local fed = 0
for j = 1, counts[2] do
  local id, v = ARGV[at], ARGV[at + 1]; at = at + 2
  local now = redis.call('HGET', KEYS[2], id)
  if id == '' then
    fed = tonumber(v) or 0
    redis.call('HINCRBY', KEYS[2], '', fed)
  else
    local last, uses = struct.unpack('<dd', v)
    if now then
      local l2, u2 = struct.unpack('<dd', now)
      if l2 == l2 and (last ~= last or l2 > last) then last = l2 end
      uses = uses + u2
    end
    redis.call('HSET', KEYS[2], id, struct.pack('<dd', last, uses))
  end
end
for j = 1, counts[3] do
  redis.call('HSETNX', KEYS[6], ARGV[at], ARGV[at + 1]); at = at + 2
end
for j = 1, counts[4] do
  redis.call('HSETNX', KEYS[7], ARGV[at], ARGV[at + 1]); at = at + 2
end
local expire = tonumber(ARGV[at])
if counts[3] > 0 and expire > 0 and redis.call('PEXPIRETIME', KEYS[6]) < expire then
  redis.call('PEXPIREAT', KEYS[6], expire)
end
if counts[1] > 0 then redis.call('HSET', KEYS[3], ARGV[1], '') end
if fed > 0 then redis.call('HINCRBY', KEYS[4], '', fed) end
redis.call('HSET', KEYS[5], ARGV[1], 1)
return held
"""
