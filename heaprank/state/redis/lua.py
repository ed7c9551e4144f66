"""The Lua scripts of the Redis backend, each run against the keys of one hash slot.

Counts are stored as packed little-endian doubles (``struct`` in Redis's Lua): a namespace's link
is ``<dd`` (pos, neg), a global shard's ``<ddd`` (pos, neg, namespaces holding the link here), a
document's ``<dd`` (last used, use count). Lua numbers are doubles, so the arithmetic matches the
Python reference (:func:`heaprank.learning.links.credit`) to rounding.
"""

from __future__ import annotations

#: One server only: everything a rerank reads, the global shards summed here, returned as packed
#: doubles in one reply. KEYS: links, docs, every global shard in order. ARGV: n features, the
#: features, then the document ids. Returns {own <dd>..., pooled <dd>..., docs <dd>...}, a
#: missing document as (NaN, 0).
READ_LOCAL = """
local function hmget(key, fields)
  local out = {}
  for first = 1, #fields, 4000 do
    local part = redis.call('HMGET', key, unpack(fields, first, math.min(first + 3999, #fields)))
    for j = 1, #part do out[first + j - 1] = part[j] end
  end
  return out
end
local nf = tonumber(ARGV[1])
local feats, ids = {}, {}
for j = 1, nf do feats[j] = ARGV[1 + j] end
for j = nf + 2, #ARGV do ids[#ids + 1] = ARGV[j] end
local zero = string.rep('\0', 16)
local own, pooled, docs = {}, {}, {}
if nf > 0 then
  local vals = hmget(KEYS[1], feats)
  local gp, gn = {}, {}
  for j = 1, nf do own[j] = vals[j] or zero; gp[j] = 0; gn[j] = 0 end
  for k = 3, #KEYS do
    local g = hmget(KEYS[k], feats)
    for j = 1, nf do
      if g[j] then
        local p, q = struct.unpack('<dd', g[j])
        gp[j] = gp[j] + p; gn[j] = gn[j] + q
      end
    end
  end
  for j = 1, nf do pooled[j] = struct.pack('<dd', gp[j], gn[j]) end
end
if #ids > 0 then
  local never = struct.pack('<dd', 0 / 0, 0)
  local d = hmget(KEYS[2], ids)
  for j = 1, #ids do docs[j] = d[j] or never end
end
return {table.concat(own), table.concat(pooled), table.concat(docs)}
"""

#: Record an impression. KEYS: body, explicit-id hash[, recall-id pointer]. ARGV: body,
#: expire-at (ms), explicit id or "", key prefix of this namespace's bodies, recall id, pointer
#: value. Returns {"new"}, {"taken"} (recall id in use) or {"held", recall id}. The same
#: impression written again (a retry after a lost reply) is "new" again: a write is idempotent.
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
if KEYS[3] then
  if not redis.call('SET', KEYS[3], ARGV[6], 'NX', 'PXAT', ARGV[2])
     and redis.call('GET', KEYS[3]) ~= ARGV[6] then
    return {'taken'}
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
if fid ~= '' then
  redis.call('HSET', KEYS[2], fid, ARGV[5])
  if redis.call('PEXPIRETIME', KEYS[2]) < tonumber(ARGV[2]) then
    redis.call('PEXPIREAT', KEYS[2], ARGV[2])
  end
end
return {'new'}
"""

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

#: Apply one feedback. KEYS: body, links, docs, own global shard, namespace set, fed zset,
#: feedback counter[, pointer], then other global shards read here (one server only). The
#: namespace's feedbacks are counted in its docs hash too, under the field "" (no document id
#: is empty), so forgetting it can take them off the shard's counter.
#: ARGV: namespace, time, a0, b0, kappa, em, n items, n features, has pointer, n other keys,
#: fed score; then the features; then per feature the other shards' (pos, neg) read by the
#: caller; then per item: rank, verdict code (1 used, 2 ignored, 3 outdated, 4 wrong), reject
#: weight, id, n features, feature indices (1-based).
#: Returns {applied item indices, already recorded item indices} (0-based), or an error
#: "HEAPRANK_UNKNOWN" / "HEAPRANK_CONFLICT <item index> <stored verdict>".
FEEDBACK = """
local body = redis.call('GET', KEYS[1])
if not body then return redis.error_reply('HEAPRANK_UNKNOWN') end
local n_shown = struct.unpack('<H', body, 4)
local ns, now = ARGV[1], tonumber(ARGV[2])
local a0, b0, kappa, em = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1'
local n_items, n_feat = tonumber(ARGV[7]), tonumber(ARGV[8])
local has_ptr, n_other = ARGV[9] == '1', tonumber(ARGV[10])
local feats = {}
for j = 1, n_feat do feats[j] = ARGV[11 + j] end
local at = 12 + n_feat
local other_pos, other_neg = {}, {}
for j = 1, n_feat do
  other_pos[j] = tonumber(ARGV[at]); other_neg[j] = tonumber(ARGV[at + 1]); at = at + 2
end
local items, todo, done = {}, {}, {}
for i = 1, n_items do
  local code = tonumber(ARGV[at + 1])
  local item = {rank = tonumber(ARGV[at]), used = code == 1, code = code,
                weight = tonumber(ARGV[at + 2]), id = ARGV[at + 3], f = {}}
  local k = tonumber(ARGV[at + 4]); at = at + 5
  for q = 1, k do item.f[q] = tonumber(ARGV[at]); at = at + 1 end
  local prev = 0
  if item.rank <= n_shown then prev = string.byte(body, 14 + item.rank) end
  if prev == 0 then
    todo[#todo + 1] = i
  elseif prev == code then
    done[#done + 1] = i - 1
  else
    return redis.error_reply('HEAPRANK_CONFLICT ' .. (i - 1) .. ' ' .. prev)
  end
  items[i] = item
end
if #todo == 0 then return {{}, done} end
if n_feat == 0 then feats = {''} end  -- (items with no features: an HMGET needs a field)
-- The links as they were: this namespace, this shard, and the other shards (same server: read
-- here; a cluster: read by the caller just before).
local first_key = has_ptr and 9 or 8
for s = 0, n_other - 1 do
  local vals = redis.call('HMGET', KEYS[first_key + s], unpack(feats))
  for j = 1, n_feat do
    if vals[j] then
      local p, q = struct.unpack('<dd', vals[j])
      other_pos[j] = other_pos[j] + p; other_neg[j] = other_neg[j] + q
    end
  end
end
local own = redis.call('HMGET', KEYS[2], unpack(feats))
local glob = redis.call('HMGET', KEYS[4], unpack(feats))
local pos, neg, gpos, gneg, gns, dpos, dneg, touched = {}, {}, {}, {}, {}, {}, {}, {}
for j = 1, n_feat do
  pos[j], neg[j], gpos[j], gneg[j], gns[j] = 0, 0, 0, 0, 0
  if own[j] then pos[j], neg[j] = struct.unpack('<dd', own[j]) end
  if glob[j] then gpos[j], gneg[j], gns[j] = struct.unpack('<ddd', glob[j]) end
  dpos[j], dneg[j] = 0, 0
end
local p = {}
local any_used = false
for _, i in ipairs(todo) do if items[i].used then any_used = true end end
if em and any_used then
  for j = 1, n_feat do
    local alpha, beta = a0 + pos[j], b0 + neg[j]
    local gp = math.max(gpos[j] + other_pos[j] - pos[j], 0)
    local gn = math.max(gneg[j] + other_neg[j] - neg[j], 0)
    local total = gp + gn
    local share = 0
    if total > 0 then share = math.min(1, kappa / math.max(total, 1e-300)) end
    alpha = alpha + share * gp; beta = beta + share * gn
    p[j] = alpha / (alpha + beta)
  end
end
for _, i in ipairs(todo) do
  local item = items[i]
  for _, j in ipairs(item.f) do touched[j] = true end
  if not item.used then
    for _, j in ipairs(item.f) do dneg[j] = dneg[j] + item.weight end
  else
    local uniform = 1 / #item.f
    local shares = {}
    if em then
      local keep = 1
      for q, j in ipairs(item.f) do keep = keep * (1 - p[j]) end
      local u = 1 - keep
      for q, j in ipairs(item.f) do
        if u > 0 then shares[q] = math.min(1, p[j] / u) else shares[q] = uniform end
      end
    else
      for q = 1, #item.f do shares[q] = uniform end
    end
    for q, j in ipairs(item.f) do
      dpos[j] = dpos[j] + shares[q]; dneg[j] = dneg[j] + (1 - shares[q])
    end
  end
end
for j = 1, n_feat do
  if touched[j] then
    if not own[j] then gns[j] = gns[j] + 1 end
    redis.call('HSET', KEYS[2], feats[j], struct.pack('<dd', pos[j] + dpos[j], neg[j] + dneg[j]))
    if string.sub(feats[j], 1, 4) ~= 'doc:' then  -- a document's feature stays the namespace's
      redis.call('HSET', KEYS[4], feats[j],
                 struct.pack('<ddd', gpos[j] + dpos[j], gneg[j] + dneg[j], gns[j]))
    end
  end
end
local applied = {}
for _, i in ipairs(todo) do
  local item = items[i]
  applied[#applied + 1] = i - 1
  redis.call('SETRANGE', KEYS[1], 13 + item.rank, string.char(item.code))
  if item.used then
    local last, uses = now, 1
    local row = redis.call('HGET', KEYS[3], item.id)
    if row then
      local old, count = struct.unpack('<dd', row)
      uses = count + 1
      if old == old and old <= now + 300 then last = math.max(old, now) end
    end
    redis.call('HSET', KEYS[3], item.id, struct.pack('<dd', last, uses))
  end
end
redis.call('PERSIST', KEYS[1])
redis.call('ZADD', KEYS[6], ARGV[11], KEYS[1])
redis.call('SADD', KEYS[5], ns)
redis.call('INCR', KEYS[7])
redis.call('HINCRBY', KEYS[3], '', 1)
if has_ptr then redis.call('PERSIST', KEYS[8]) end
return {applied, done}
"""

#: Forget a namespace in its slot. KEYS: links, docs, explicit ids, own global shard, namespace
#: set, fed zset, feedback counter, then the namespace's impression bodies. ARGV: namespace,
#: scrub (1/0). Its feedbacks (the docs hash's field "") leave the shard's counter.
#: Returns the features no namespace of this shard holds any more.
FORGET = """
local rows = redis.call('HGETALL', KEYS[1])
local gone = {}
for r = 1, #rows, 2 do
  local f = rows[r]
  local pos, neg = struct.unpack('<dd', rows[r + 1])
  local g = redis.call('HGET', KEYS[4], f)
  if g then
    local gp, gn, count = struct.unpack('<ddd', g)
    if ARGV[2] == '1' then gp = math.max(gp - pos, 0); gn = math.max(gn - neg, 0) end
    count = count - 1
    redis.call('HSET', KEYS[4], f, struct.pack('<ddd', gp, gn, count))
    if count <= 0 then gone[#gone + 1] = f end
  end
end
local fed = tonumber(redis.call('HGET', KEYS[2], '') or '0') or 0
if fed > 0 then
  local left = (tonumber(redis.call('GET', KEYS[7]) or '0') or 0) - fed
  redis.call('SET', KEYS[7], math.max(left, 0))
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('SREM', KEYS[5], ARGV[1])
for k = 8, #KEYS do
  redis.call('ZREM', KEYS[6], KEYS[k])
  redis.call('DEL', KEYS[k])
end
return gone
"""

#: Drop global fields that no namespace holds any more, anywhere. KEYS: a global shard. ARGV:
#: features whose total namespace count was zero. A field a namespace took since is kept.
DROP_UNHELD = """
local dropped = 0
for _, f in ipairs(ARGV) do
  local g = redis.call('HGET', KEYS[1], f)
  if g then
    local _, _, count = struct.unpack('<ddd', g)
    if count <= 0 then redis.call('HDEL', KEYS[1], f); dropped = dropped + 1 end
  end
end
return dropped
"""

#: Drop the oldest fed impressions of one shard. KEYS: fed zset, then bodies. Returns count.
DROP_FED = """
for k = 2, #KEYS do
  redis.call('ZREM', KEYS[1], KEYS[k])
  redis.call('DEL', KEYS[k])
end
return #KEYS - 1
"""
