"""The Lua scripts that write and read impressions (see :mod:`.lua` for the rest): a recall id
minted by the backend (20 digits, its bucket last) names a field of a hash of its bucket's; an id of
16 digits (layout 2's first impressions) names a key of its own through a pointer."""

from __future__ import annotations

#: Both PUTs' last step: an explicit feedback id (ARGV 3, KEYS 2) names the recall id (ARGV 5),
#: and its hash lives as long as its newest impression (ARGV 2).
_KEEP_EXPLICIT_ID = """
if fid ~= '' then
  redis.call('HSET', KEYS[2], fid, ARGV[5])
  if redis.call('PEXPIRETIME', KEYS[2]) < tonumber(ARGV[2]) then
    redis.call('PEXPIREAT', KEYS[2], ARGV[2])
  end
end
return {'new'}
"""

#: Record an impression. KEYS: body, explicit-id hash, the bucket's open zset[, recall-id
#: pointer]. ARGV: body, expire-at (ms), explicit id or "", key prefix of this namespace's
#: bodies, recall id, pointer value, now (ms). Returns {"new"}, {"taken"} (recall id in use) or
#: {"held", recall id}. The same impression written again (a retry after a lost reply) is "new"
#: again: a write is idempotent.
PUT = """
local fid = ARGV[3]
if fid ~= '' then
  local held = redis.call('HGET', KEYS[2], fid)
  if held and redis.call('EXISTS', ARGV[4] .. held) == 1 then return {'held', held} end
end
local stored = redis.call('GET', KEYS[1])
if stored then
  if stored == ARGV[1] then return {'new'} end
  return {'taken'}
end
if KEYS[4] then
  if not redis.call('SET', KEYS[4], ARGV[6], 'NX', 'PXAT', ARGV[2])
     and redis.call('GET', KEYS[4]) ~= ARGV[6] then
    return {'taken'}
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[7])
redis.call('ZADD', KEYS[3], ARGV[2], KEYS[1])
""" + _KEEP_EXPLICIT_ID

#: Record an impression of a minted (20-digit) recall id as a field of its 10-minute slot's open
#: hash. KEYS: the open hash, explicit-id hash, the bucket's open-slots zset, the fed hash of
#: its hour. ARGV: 1 value (body, namespace, its length), 2 its expiry (ms), 3 explicit id or
#: "", 4 key head of the bucket ("P:{t}:"), 5 recall id, 6 slot, 7 the open hash's expiry (ms),
#: 8 now (ms), 9 time to live (ms), 10 key prefix of this namespace's layout-2 bodies. Returns
#: as PUT.
PUT_HOURLY = """
local head, now, ttl = ARGV[4], tonumber(ARGV[8]), tonumber(ARGV[9])
local function live(rid)  -- an explicit id's recall: still there?
  if #rid ~= 20 then return redis.call('EXISTS', ARGV[10] .. rid) == 1 end
  local born = tonumber(string.sub(rid, 1, 11), 16)
  local hour = string.format('%d', math.floor(born / 3600000))
  local slot = string.format('%d', math.floor(born / 600000))
  if redis.call('HEXISTS', head .. 'k:' .. hour, rid) == 1 then return true end
  return born + ttl > now and redis.call('HEXISTS', head .. 'h:' .. slot, rid) == 1
end
local fid = ARGV[3]
if fid ~= '' then
  local held = redis.call('HGET', KEYS[2], fid)
  if held and live(held) then return {'held', held} end
end
local stored = redis.call('HGET', KEYS[4], ARGV[5]) or redis.call('HGET', KEYS[1], ARGV[5])
if stored then
  if stored == ARGV[1] then return {'new'} end
  return {'taken'}
end
redis.call('HSET', KEYS[1], ARGV[5], ARGV[1])
if redis.call('PEXPIRETIME', KEYS[1]) < tonumber(ARGV[7]) then
  redis.call('PEXPIREAT', KEYS[1], ARGV[7])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], 'GT', ARGV[7], ARGV[6])
""" + _KEEP_EXPLICIT_ID

#: One server only: the pointer, then the body it names, in one call. KEYS: pointer. ARGV:
#: key prefix, recall id. Returns {namespace, body} or nil.
GET_LOCAL = """
local at = redis.call('GET', KEYS[1])
if not at then return nil end
local colon = string.find(at, ':', 1, true)
local ns = string.sub(at, colon + 1)
local body = redis.call('GET', ARGV[1] .. ':{' .. string.sub(at, 1, colon - 1) .. '}:i:' .. ns
                        .. ':' .. ARGV[2])
if not body then return nil end
return {ns, body}
"""


#: Drop the oldest fed impressions of one bucket. KEYS: fed zset, then bodies. Returns count.
DROP_FED = """
for k = 2, #KEYS do
  redis.call('ZREM', KEYS[1], KEYS[k])
  redis.call('DEL', KEYS[k])
end
return #KEYS - 1
"""

#: Drop the oldest impressions with feedback of some hours of one bucket. KEYS: the fed-hours
#: zset, then the hours' fed hashes. ARGV: per hash its hour and how many to drop (the oldest
#: recall ids: they sort by age). Returns the count dropped.
TRIM_FED = """
local dropped = 0
for k = 2, #KEYS do
  local hour, n = ARGV[2 * k - 3], tonumber(ARGV[2 * k - 2])
  local fields = redis.call('HKEYS', KEYS[k])
  if n >= #fields then
    redis.call('DEL', KEYS[k]); dropped = dropped + #fields
  elseif n > 0 then
    table.sort(fields)
    for first = 1, n, 4000 do
      redis.call('HDEL', KEYS[k], unpack(fields, first, math.min(first + 3999, n)))
    end
    dropped = dropped + n
  end
  if redis.call('EXISTS', KEYS[k]) == 0 then redis.call('ZREM', KEYS[1], hour) end
end
return dropped
"""
