"""The Lua scripts of the Redis backend, each run against the keys of one hash slot (on one
server a script may also touch the pooled shards it is given).

Counts are stored as packed little-endian doubles (``struct`` in Redis's Lua): a namespace's link
is ``<dd`` (pos, neg), a pooled shard's ``<ddd`` (pos, neg, namespaces holding the link), a
document's ``<dd`` (last used, use count). Lua numbers are doubles, so the arithmetic matches the
Python reference (:func:`heaprank.learning.links.credit`) to rounding.

Pooled deltas that a script cannot write itself (in a Cluster the pooled shards sit in other
slots) go to its bucket's outbox (``P:{t}:q``) in the same script: entries
``<H`` name length, name, ``<ddd`` (pos, neg, namespaces) each; the client pushes them to the
shards with POOL_ADD, which records the entry's id in the shard's marker zset in the same
script, so an entry pushed twice (a retry, a crash before the outbox entry was deleted, a
copy pushed after a drain) counts once (:mod:`.pooled`: markers and their watermark).
"""

from __future__ import annotations

from .blob import LUA as _BLOB

#: The layout check of the scripts that touch pooled shards on one server: ARGV starts with the
#: meta key and the meta value the caller placed the shards by ("": no check, a Cluster), both
#: taken off ARGV here; a meta that moved on (a reshard: reshard.py) is the error
#: HEAPRANK_EPOCH, and the caller reloads it and runs the script again. No meta at all (a
#: replica not synced yet) is no check.
GUARD = """
local META_KEY, META_WANT = table.remove(ARGV, 1), table.remove(ARGV, 1)
if META_WANT ~= '' and (redis.call('GET', META_KEY) or META_WANT) ~= META_WANT then
  return redis.error_reply('HEAPRANK_EPOCH')
end
"""

#: Helpers every script below starts with.
_COMMON = _BLOB + """
local function hmget(key, fields)
  local out = {}
  for first = 1, #fields, 4000 do
    local part = redis.call('HMGET', key, unpack(fields, first, math.min(first + 3999, #fields)))
    for j = 1, #part do out[first + j - 1] = part[j] end
  end
  return out
end
local function hset(key, flat)
  for first = 1, #flat, 4000 do
    redis.call('HSET', key, unpack(flat, first, math.min(first + 3999, #flat)))
  end
end
-- Add (pos, neg, namespaces) deltas to one pooled shard (rows <dddd: pos, neg, namespaces,
-- id); a new row takes the id given. A field that a forget leaves held by no namespace leaves
-- the shard (its name may be one namespace's data): returned as {name, id, ...} for the id map.
-- (Entries may arrive out of order: a row at 0 namespaces by an entry that adds none waits for
-- the entry that adds its holder.) The shard's version "" is bumped.
local function pool_add(key, fields, dp, dn, dc, ids, rows)
  if #fields == 0 then return {} end
  rows = rows or hmget(key, fields)  -- (a caller that read them just before passes them)
  local flat, gone, dropped = {}, {}, {}
  for j = 1, #fields do
    local p, q, c, id = 0, 0, 0, ids[j]
    if rows[j] then p, q, c, id = struct.unpack('<dddd', rows[j]) end
    p = math.max(p + dp[j], 0); q = math.max(q + dn[j], 0); c = c + dc[j]
    if c <= 0 and dc[j] < 0 then
      if rows[j] then
        gone[#gone + 1] = fields[j]
        dropped[#dropped + 1] = fields[j]; dropped[#dropped + 1] = tostring(id)
      end
    else
      flat[#flat + 1] = fields[j]; flat[#flat + 1] = struct.pack('<dddd', p, q, c, id)
    end
  end
  if #flat > 0 then hset(key, flat) end
  for first = 1, #gone, 4000 do
    redis.call('HDEL', key, unpack(gone, first, math.min(first + 3999, #gone)))
  end
  redis.call('HINCRBY', key, '', 1)
  return dropped
end
local function outbox_entry(fields, ids, dp, dn, dc)
  local t = redis.call('TIME')
  local parts = {struct.pack('<d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))}
  for j = 1, #fields do
    parts[#parts + 1] = struct.pack('<H', #fields[j]) .. fields[j]
                        .. struct.pack('<dddd', ids[j], dp[j], dn[j], dc[j])
  end
  return table.concat(parts)
end
-- The id of a pooled feature, made on first use (one server: KEYS ids, names declared).
local function intern(ids_key, names_key, name)
  local id = redis.call('HGET', ids_key, name)
  if id then return tonumber(id) end
  id = redis.call('HINCRBY', ids_key, '', 1)
  redis.call('HSET', ids_key, name, id)
  redis.call('HSET', names_key, id, name)
  return id
end
"""

#: One server only: everything a rerank reads, the pooled shards read here, returned as packed
#: doubles in one reply. KEYS: links, docs, the document features' hash, the pooled shards of
#: the features. ARGV: GUARD's two, n features, the features, n ids, the ids, then per feature
#: its pooled key (1-based index past the third key; 0: a document feature). Returns
#: {own <dd>..., pooled <dd>..., docs <dd>...}, a missing document as (NaN, 0).
READ_LOCAL = _COMMON + GUARD + """
local nf = tonumber(ARGV[1])
local feats, ids = {}, {}
for j = 1, nf do feats[j] = ARGV[1 + j] end
local n_ids = tonumber(ARGV[nf + 2])
for j = 1, n_ids do ids[j] = ARGV[nf + 2 + j] end
local at = nf + 3 + n_ids
local zero = string.rep('\\0', 16)
local own, pooled, docs = {}, {}, {}
if nf > 0 then
  local by_key, own_feats, own_js = {}, {}, {}
  for j = 1, nf do
    own[j] = zero; pooled[j] = zero
    local k = tonumber(ARGV[at + j - 1])
    if k > 0 then
      by_key[k] = by_key[k] or {{}, {}}
      local group = by_key[k]
      group[1][#group[1] + 1] = feats[j]; group[2][#group[2] + 1] = j
    else
      own_feats[#own_feats + 1] = feats[j]; own_js[#own_js + 1] = j
    end
  end
  local _, bpos, bneg = blob_decode(redis.call('GET', KEYS[1]))
  for k, group in pairs(by_key) do
    local g = hmget(KEYS[3 + k], group[1])
    for q = 1, #group[1] do
      if g[q] then
        local p, n, _, id = struct.unpack('<dddd', g[q])
        local j = group[2][q]
        pooled[j] = struct.pack('<dd', p, n)
        if bneg[id] then own[j] = struct.pack('<dd', bpos[id], bneg[id]) end
      end
    end
  end
  if #own_feats > 0 then
    local e = hmget(KEYS[3], own_feats)
    for q = 1, #own_feats do if e[q] then own[own_js[q]] = e[q] end end
  end
end
if #ids > 0 then
  local never = struct.pack('<dd', 0 / 0, 0)
  local d = hmget(KEYS[2], ids)
  for j = 1, #ids do docs[j] = d[j] or never end
end
return {table.concat(own), table.concat(pooled), table.concat(docs)}
"""

#: Apply one feedback. KEYS: 1 body, 2 links, 3 docs, 4 the bucket's namespace hash, 5 fed
#: zset, 6 the namespace hash again (its field "" counts the bucket's feedbacks), 7 open zset,
#: 8 the recall-id pointer (one server) or the outbox (a Cluster), 9 the document features'
#: hash, 10 the id map and 11 its reverse (one server; in a Cluster any key of the slot,
#: unused), then the pooled shards written here (one server). A minted (20-digit) recall id's
#: impression is a field instead: KEYS 1 its slot's open hash, 5 the fed-hours zset, 7 its
#: hour's fed hash, 8 any key of the slot (one server); ARGV 11 its expiry (ms); a field of
#: another namespace is unknown.
#: The namespace's feedbacks are counted in its docs hash too, under the field "" (no document
#: id is empty), so forgetting it can take them off the bucket's counter.
#: ARGV: GUARD's two (in a Cluster ""), then 1 namespace, 2 time, 3 a0, 4 b0, 5 kappa, 6 em,
#: 7 n items, 8 n features, 9 cluster, 10 n pooled keys, 11 fed score (a 20-digit id: its
#: expiry), 12 recall id; then the features; then per feature its pooled key (1-based past
#: KEYS[11]; 0: not pooled, or a Cluster); then per feature its id (a Cluster; 0: a document
#: feature); then per feature the pooled (pos, neg) read by the caller (a Cluster); then per
#: item: rank, verdict code (1 used, 2 ignored, 3 outdated, 4 wrong), reject weight, id, n
#: features, feature indices.
#: Returns {applied item indices, already recorded item indices, outbox entry id, its deltas}
#: (0-based; the outbox part "" unless a Cluster), or an error "HEAPRANK_UNKNOWN" /
#: "HEAPRANK_CONFLICT <item index> <stored verdict>".
FEEDBACK = _COMMON + GUARD + """
local rid = ARGV[12]
local hourly = #rid == 20
local body
if hourly then
  body = redis.call('HGET', KEYS[7], rid)
  if not body then
    body = redis.call('HGET', KEYS[1], rid)
    local t = redis.call('TIME')
    if body and tonumber(ARGV[11]) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
      body = nil  -- past its time to live (its slot's hash outlives it)
    end
  end
  if body then
    local n = struct.unpack('<H', body, #body - 1)
    if string.sub(body, #body - 1 - n, #body - 2) ~= ARGV[1] then body = nil
    else body = string.sub(body, 1, #body - 2 - n) end
  end
else
  body = redis.call('GET', KEYS[1])
end
if not body then return redis.error_reply('HEAPRANK_UNKNOWN') end
local n_shown = struct.unpack('<H', body, 4)
local ns, now = ARGV[1], tonumber(ARGV[2])
local a0, b0, kappa, em = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1'
local n_items, n_feat = tonumber(ARGV[7]), tonumber(ARGV[8])
local cluster, n_pool = ARGV[9] == '1', tonumber(ARGV[10])
local feats, shard, fid, is_doc, gpos, gneg = {}, {}, {}, {}, {}, {}
for j = 1, n_feat do
  feats[j] = ARGV[12 + j]; is_doc[j] = string.sub(feats[j], 1, 4) == 'doc:'
end
local at = 13 + n_feat
for j = 1, n_feat do shard[j] = tonumber(ARGV[at]); at = at + 1 end
for j = 1, n_feat do fid[j] = tonumber(ARGV[at]); at = at + 1 end
for j = 1, n_feat do
  gpos[j] = tonumber(ARGV[at]); gneg[j] = tonumber(ARGV[at + 1]); at = at + 2
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
if #todo == 0 then  -- (items without features still get their verdicts below)
  local pending = {}
  if cluster and #done > 0 then  -- a retry: the outbox entry of the first attempt, if unpushed
    for _, i in ipairs(done) do pending[#pending + 1] = ARGV[12] .. ':' .. items[i + 1].rank end
    local found = redis.call('HMGET', KEYS[8], unpack(pending))
    for q = 1, #pending do
      if found[q] then return {{}, done, pending[q], found[q]} end
    end
  end
  return {{}, done, '', ''}
end
-- The links as they were: this namespace's, and the pooled counts (read here on one server,
-- with the features' ids; given by the caller in a Cluster).
local row_of = {}  -- one server: each pooled feature's row as read (false: none)
if not cluster then
  local by_key = {}
  for j = 1, n_feat do
    if shard[j] > 0 then
      by_key[shard[j]] = by_key[shard[j]] or {}
      table.insert(by_key[shard[j]], j)
    end
  end
  for k, js in pairs(by_key) do
    local names = {}
    for q, j in ipairs(js) do names[q] = feats[j] end
    local rows = hmget(KEYS[11 + k], names)
    for q, j in ipairs(js) do
      row_of[j] = rows[q]
      if rows[q] then
        local _
        gpos[j], gneg[j], _, fid[j] = struct.unpack('<dddd', rows[q])
      end
    end
  end
end
local bids, bpos, bneg = blob_decode(redis.call('GET', KEYS[2]))
local doc_names, doc_js = {}, {}
for j = 1, n_feat do
  if is_doc[j] then doc_names[#doc_names + 1] = feats[j]; doc_js[#doc_js + 1] = j end
end
local doc_rows = #doc_names > 0 and hmget(KEYS[9], doc_names) or {}
local pos, neg, held, dpos, dneg, touched = {}, {}, {}, {}, {}, {}
for j = 1, n_feat do
  pos[j], neg[j], dpos[j], dneg[j], held[j] = 0, 0, 0, 0, false
  if not is_doc[j] and fid[j] > 0 and bneg[fid[j]] then
    pos[j], neg[j], held[j] = bpos[fid[j]], bneg[fid[j]], true
  end
end
for q, j in ipairs(doc_js) do
  if doc_rows[q] then pos[j], neg[j] = struct.unpack('<dd', doc_rows[q]); held[j] = true end
end
local p = {}
local any_used = false
for _, i in ipairs(todo) do if items[i].used then any_used = true end end
if em and any_used then
  for j = 1, n_feat do
    local alpha, beta = a0 + pos[j], b0 + neg[j]
    local gp = math.max(gpos[j] - pos[j], 0)
    local gn = math.max(gneg[j] - neg[j], 0)
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
local doc_flat, pooled = {}, {}  -- pooled: key index (0: the outbox) -> deltas
for j = 1, n_feat do
  if touched[j] then
    if is_doc[j] then
      doc_flat[#doc_flat + 1] = feats[j]
      doc_flat[#doc_flat + 1] = struct.pack('<dd', pos[j] + dpos[j], neg[j] + dneg[j])
    else
      if fid[j] <= 0 then fid[j] = intern(KEYS[10], KEYS[11], feats[j]) end
      local id = fid[j]
      if not bneg[id] then bids[#bids + 1] = id end
      bpos[id], bneg[id] = f32(pos[j] + dpos[j]), f32(neg[j] + dneg[j])
      local k = cluster and 0 or shard[j]
      pooled[k] = pooled[k] or {{}, {}, {}, {}, {}, {}}
      local g = pooled[k]
      g[1][#g[1] + 1] = feats[j]; g[2][#g[2] + 1] = bpos[id] - pos[j]
      g[3][#g[3] + 1] = bneg[id] - neg[j]; g[4][#g[4] + 1] = held[j] and 0 or 1
      g[5][#g[5] + 1] = id
      g[6] = g[6] or {}
      g[6][#g[6] + 1] = row_of[j] or false
    end
  end
end
redis.call('SET', KEYS[2], blob_encode(bids, bpos, bneg))
if #doc_flat > 0 then hset(KEYS[9], doc_flat) end
local applied, first_rank = {}, nil
for _, i in ipairs(todo) do
  local item = items[i]
  applied[#applied + 1] = i - 1
  if first_rank == nil or item.rank < first_rank then first_rank = item.rank end
  if not hourly then
    redis.call('SETRANGE', KEYS[1], 13 + item.rank, string.char(item.code))
  elseif item.rank <= n_shown then
    body = string.sub(body, 1, 13 + item.rank) .. string.char(item.code)
           .. string.sub(body, 15 + item.rank)
  end
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
if hourly then  -- from its slot's open hash to its hour's fed one, the hour in the fed index
  redis.call('HSET', KEYS[7], rid, body .. ns .. struct.pack('<H', #ns))
  redis.call('HDEL', KEYS[1], rid)
  local hour = string.format('%d', math.floor(tonumber(string.sub(rid, 1, 11), 16) / 3600000))
  redis.call('ZADD', KEYS[5], hour, hour)
else
  redis.call('PERSIST', KEYS[1])
  redis.call('ZREM', KEYS[7], KEYS[1])
  redis.call('ZADD', KEYS[5], ARGV[11], KEYS[1])
end
redis.call('HSET', KEYS[4], ns, '')
redis.call('HINCRBY', KEYS[6], '', 1)
redis.call('HINCRBY', KEYS[3], '', 1)
local box_id, box = '', ''
if cluster then
  if pooled[0] then
    local g = pooled[0]
    box_id = ARGV[12] .. ':' .. first_rank
    box = outbox_entry(g[1], g[5], g[2], g[3], g[4])
    redis.call('HSET', KEYS[8], box_id, box)
  end
else
  if not hourly then redis.call('PERSIST', KEYS[8]) end
  for k, g in pairs(pooled) do pool_add(KEYS[11 + k], g[1], g[2], g[3], g[4], g[5], g[6]) end
end
return {applied, done, box_id, box}
"""

#: Forget a namespace in its slot. KEYS: links, docs, explicit ids, the bucket's namespace hash,
#: fed zset, open zset, the namespace hash again (its feedback counter ""), outbox, document
#: features, the open-slots and fed-hours zsets, then the namespace's impression bodies (layout
#: 2's first form). ARGV: namespace, scrub (1/0), outbox entry id, key head of the bucket
#: ("P:{t}:"): its fields in the bucket's open and fed hashes go too. Its feedbacks (the docs
#: hash's field "") leave the bucket's counter; its links leave the pooled layer through an
#: outbox entry (by id: the caller adds the names) with the namespace count of each, and its
#: evidence too with scrub; the caller pushes it. Returns the outbox entry ("" if no links).
FORGET = _COMMON + """
local ids, pos, neg = blob_decode(redis.call('GET', KEYS[1]))
local fields, dp, dn, dc = {}, {}, {}, {}
for q, id in ipairs(ids) do
  fields[q] = ''; dc[q] = -1
  if ARGV[2] == '1' then dp[q] = -pos[id]; dn[q] = -neg[id] else dp[q] = 0; dn[q] = 0 end
end
local fed = tonumber(redis.call('HGET', KEYS[2], '') or '0') or 0
if fed > 0 then
  local left = (tonumber(redis.call('HGET', KEYS[7], '') or '0') or 0) - fed
  redis.call('HSET', KEYS[7], '', math.max(left, 0))
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[9])
redis.call('HDEL', KEYS[4], ARGV[1])
for _, hours in ipairs({{KEYS[10], 'h:'}, {KEYS[11], 'k:'}}) do
  for _, hour in ipairs(redis.call('ZRANGE', hours[1], 0, -1)) do
    local key, cursor = ARGV[4] .. hours[2] .. hour, '0'
    repeat
      local page = redis.call('HSCAN', key, cursor, 'COUNT', 500)
      local gone = {}
      cursor = page[1]
      for q = 1, #page[2], 2 do
        local v = page[2][q + 1]
        local n = struct.unpack('<H', v, #v - 1)
        if string.sub(v, #v - 1 - n, #v - 2) == ARGV[1] then gone[#gone + 1] = page[2][q] end
      end
      if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
    until cursor == '0'
    if redis.call('EXISTS', key) == 0 then redis.call('ZREM', hours[1], hour) end
  end
end
for k = 12, #KEYS do
  redis.call('ZREM', KEYS[5], KEYS[k])
  redis.call('ZREM', KEYS[6], KEYS[k])
  redis.call('DEL', KEYS[k])
end
if #ids == 0 then return '' end
local box = outbox_entry(fields, ids, dp, dn, dc)
redis.call('HSET', KEYS[8], ARGV[3], box)
return box
"""

#: Push outbox entries to one pooled shard, each at most once. KEYS: the shard, its marker
#: zset (entry id -> its creation time; "" -> the watermark: every entry older was applied).
#: ARGV: force (1: the resharder's, into a frozen shard), n entries, then per entry: its id,
#: creation time (ms), n fields, the fields, then per field its id and (pos, neg, namespaces)
#: deltas. Returns the fields the shard dropped (no namespace holds them any more) as
#: {name, id, ...}; a shard a reshard froze (version -2) is HEAPRANK_FROZEN, one it moved
#: (version -1) HEAPRANK_EPOCH (reshard.py).
POOL_ADD = _COMMON + """
local force, n, at, dropped = ARGV[1] == '1', tonumber(ARGV[2]), 3, {}
local state = redis.call('HGET', KEYS[1], '')
if state == '-1' then
  if force then return {} end
  return redis.error_reply('HEAPRANK_EPOCH')
end
if state == '-2' and not force then return redis.error_reply('HEAPRANK_FROZEN') end
local mark = tonumber(redis.call('ZSCORE', KEYS[2], '') or '-1')
for e = 1, n do
  local id, born, m = ARGV[at], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]); at = at + 3
  local fields, ids, dp, dn, dc = {}, {}, {}, {}, {}
  for j = 1, m do fields[j] = ARGV[at + j - 1] end
  at = at + m
  for j = 1, m do
    ids[j], dp[j], dn[j], dc[j] = tonumber(ARGV[at]), tonumber(ARGV[at + 1]),
                                  tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
    at = at + 4
  end
  if born >= mark and not redis.call('ZSCORE', KEYS[2], id) then
    for _, x in ipairs(pool_add(KEYS[1], fields, dp, dn, dc, ids)) do dropped[#dropped + 1] = x end
    redis.call('ZADD', KEYS[2], born, id)
  end
end
if state == '-2' then redis.call('HSET', KEYS[1], '', -2) end  -- (frozen it stays)
return dropped
"""

#: Raise a shard's watermark. KEYS: its marker zset. ARGV: the new watermark (ms). The markers
#: of entries older than it go (POOL_ADD skips such entries). Returns the markers removed.
MARKS_TRIM = """
local held = redis.call('ZSCORE', KEYS[1], '')
if held and tonumber(held) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], '')
return redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
"""

#: The ids of pooled features, made on first use (a Cluster: before the feedback script).
#: KEYS: the id map, its reverse. ARGV: the names. Returns their ids.
INTERN = _COMMON + """
local out = {}
for j = 1, #ARGV do out[j] = intern(KEYS[1], KEYS[2], ARGV[j]) end
return out
"""
