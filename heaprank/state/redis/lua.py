"""The Lua scripts of the Redis backend, each run against the keys of one hash slot (on one
server a script may also touch the pooled shards it is given).

Counts are stored as packed little-endian doubles (``struct`` in Redis's Lua): a namespace's link
is ``<dd`` (pos, neg), a pooled shard's ``<ddd`` (pos, neg, namespaces holding the link), a
document's ``<dd`` (last used, use count). Lua numbers are doubles, so the arithmetic matches the
Python reference (:func:`heaprank.model.links.credit`) to rounding.

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
#: {own <dd>..., pooled <ddd> (pos, neg, namespaces)..., docs <dd>...}, a missing document as
#: (NaN, 0).
READ_LOCAL = _COMMON + GUARD + """
local nf = tonumber(ARGV[1])
local feats, ids = {}, {}
for j = 1, nf do feats[j] = ARGV[1 + j] end
local n_ids = tonumber(ARGV[nf + 2])
for j = 1, n_ids do ids[j] = ARGV[nf + 2 + j] end
local at = nf + 3 + n_ids
local zero, zero3 = string.rep('\\0', 16), string.rep('\\0', 24)
local own, pooled, docs = {}, {}, {}
if nf > 0 then
  local by_key, own_feats, own_js = {}, {}, {}
  for j = 1, nf do
    own[j] = zero; pooled[j] = zero3
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
        local p, n, c, id = struct.unpack('<dddd', g[q])
        local j = group[2][q]
        pooled[j] = struct.pack('<ddd', p, n, c)
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

#: Apply one feedback update (:class:`~heaprank.records.Update`: learning worked its increments
#: out; this script only adds them). KEYS: 1 body, 2 links, 3 docs, 4 the bucket's namespace
#: hash, 5 fed zset, 6 the namespace hash again (its field "" counts the bucket's feedbacks),
#: 7 open zset, 8 the recall-id pointer (one server) or the outbox (a Cluster), 9 the document
#: features' hash, 10 the id map and 11 its reverse (one server; in a Cluster any key of the
#: slot, unused), then the pooled shards written here (one server), then, with edges, the
#: namespace's adjacency hash. A minted (20-digit) recall id's impression is a field instead:
#: KEYS 1 its slot's open hash, 5 the fed-hours zset, 7 its hour's fed hash, 8 any key of the
#: slot (one server); ARGV 7 its expiry (ms); a field of another namespace is unknown.
#: The namespace's feedbacks are counted in its docs hash too, under the field "" (no document
#: id is empty), so forgetting it can take them off the bucket's counter.
#: ARGV: GUARD's two (in a Cluster ""), then 1 namespace, 2 time, 3 n items, 4 n features,
#: 5 cluster, 6 n pooled keys, 7 fed score (a 20-digit id: its expiry), 8 recall id, 9 edges
#: (1/0); then the features; then per feature its pooled key (1-based past KEYS[11]; 0: not
#: pooled, or a Cluster); then per feature its id (a Cluster; 0: a document feature); then per
#: feature its (pos, neg) increments; then per item: rank, verdict code (1 used, 2 ignored,
#: 3 outdated, 4 wrong), id; then, with edges: the version they were worked out from, the
#: namespace's edge count after them, n deleted pairs and the pairs (a, b), n written edges and
#: each (a, b, strength, count, last).
#: Returns {1, outbox entry id, its deltas} (the outbox part "" unless a Cluster), or {0}: the
#: update is stale (the recall is unknown, an item has a verdict already, or the edges moved
#: on) and nothing was written.
FEEDBACK = _COMMON + GUARD + """
-- Write an update's co-use edges (ARGV from ``at``: total, deleted pairs, written rows) into the
-- adjacency hash: each document's record ``<I4`` id length, the neighbour's id, ``<ddd``
-- (strength, count, last), neighbours sorted; field "" "<count>:<version>".
local function write_edges(adj_key, version, at)
  local records = {}
  local function record(d)
    if records[d] == nil then
      local out, v, pos = {}, redis.call('HGET', adj_key, d), 1
      while v and pos <= #v do
        local len = struct.unpack('<I4', v, pos)
        local id = string.sub(v, pos + 4, pos + 3 + len)
        out[id] = {struct.unpack('<ddd', v, pos + 4 + len)}
        pos = pos + 28 + len
      end
      records[d] = out
    end
    return records[d]
  end
  local total = tonumber(ARGV[at]); at = at + 1
  local n_deleted = tonumber(ARGV[at]); at = at + 1
  for _ = 1, n_deleted do
    local a, b = ARGV[at], ARGV[at + 1]; at = at + 2
    record(a)[b] = nil; record(b)[a] = nil
  end
  local n_written = tonumber(ARGV[at]); at = at + 1
  for _ = 1, n_written do
    local a, b = ARGV[at], ARGV[at + 1]
    local row = {tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])}
    at = at + 5
    record(a)[b] = row; record(b)[a] = row
  end
  for d, nbrs in pairs(records) do
    local ids = {}
    for b in pairs(nbrs) do ids[#ids + 1] = b end
    if #ids == 0 then
      redis.call('HDEL', adj_key, d)
    else
      table.sort(ids)
      local parts = {}
      for k, b in ipairs(ids) do
        local r = nbrs[b]
        parts[k] = struct.pack('<I4', #b) .. b .. struct.pack('<ddd', r[1], r[2], r[3])
      end
      redis.call('HSET', adj_key, d, table.concat(parts))
    end
  end
  redis.call('HSET', adj_key, '', total .. ':' .. (version + 1))
end
local rid = ARGV[8]
local hourly = #rid == 20
local body
if hourly then
  body = redis.call('HGET', KEYS[7], rid)
  if not body then
    body = redis.call('HGET', KEYS[1], rid)
    local t = redis.call('TIME')
    if body and tonumber(ARGV[7]) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
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
if not body then return {0} end
local n_shown = struct.unpack('<H', body, 4)
local ns, now = ARGV[1], tonumber(ARGV[2])
local n_items, n_feat = tonumber(ARGV[3]), tonumber(ARGV[4])
local cluster, n_pool, with_edges = ARGV[5] == '1', tonumber(ARGV[6]), ARGV[9] == '1'
local feats, shard, fid, is_doc, dpos, dneg = {}, {}, {}, {}, {}, {}
for j = 1, n_feat do
  feats[j] = ARGV[9 + j]; is_doc[j] = string.sub(feats[j], 1, 4) == 'doc:'
end
local at = 10 + n_feat
for j = 1, n_feat do shard[j] = tonumber(ARGV[at]); at = at + 1 end
for j = 1, n_feat do fid[j] = tonumber(ARGV[at]); at = at + 1 end
for j = 1, n_feat do
  dpos[j] = tonumber(ARGV[at]); dneg[j] = tonumber(ARGV[at + 1]); at = at + 2
end
local items = {}
for i = 1, n_items do
  local item = {rank = tonumber(ARGV[at]), code = tonumber(ARGV[at + 1]), id = ARGV[at + 2]}
  at = at + 3
  if item.rank <= n_shown and string.byte(body, 14 + item.rank) ~= 0 then return {0} end
  items[i] = item
end
local adj_key, edge_version = KEYS[#KEYS], 0
if with_edges then
  local held = redis.call('HGET', adj_key, '') or '0'
  local colon = string.find(held, ':', 1, true)
  if colon then edge_version = tonumber(string.sub(held, colon + 1)) end
  if edge_version ~= tonumber(ARGV[at]) then return {0} end
end
-- The pooled rows (one server): each feature's id, and the row pool_add rewrites.
local row_of = {}
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
        _, _, _, fid[j] = struct.unpack('<dddd', rows[q])
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
local pos, neg, held = {}, {}, {}
for j = 1, n_feat do
  pos[j], neg[j], held[j] = 0, 0, false
  if not is_doc[j] and fid[j] > 0 and bneg[fid[j]] then
    pos[j], neg[j], held[j] = bpos[fid[j]], bneg[fid[j]], true
  end
end
for q, j in ipairs(doc_js) do
  if doc_rows[q] then pos[j], neg[j] = struct.unpack('<dd', doc_rows[q]); held[j] = true end
end
local doc_flat, pooled = {}, {}  -- pooled: key index (0: the outbox) -> deltas
for j = 1, n_feat do
  if is_doc[j] then
    doc_flat[#doc_flat + 1] = feats[j]
    doc_flat[#doc_flat + 1] = struct.pack('<dd', pos[j] + dpos[j], neg[j] + dneg[j])
  else
    if fid[j] <= 0 then fid[j] = intern(KEYS[10], KEYS[11], feats[j]) end
    local id = fid[j]
    if not bneg[id] then bids[#bids + 1] = id end
    bpos[id], bneg[id] = pos[j] + dpos[j], neg[j] + dneg[j]
    local k = cluster and 0 or shard[j]
    pooled[k] = pooled[k] or {{}, {}, {}, {}, {}, {}}
    local g = pooled[k]
    g[1][#g[1] + 1] = feats[j]; g[2][#g[2] + 1] = bpos[id] - pos[j]
    g[3][#g[3] + 1] = bneg[id] - neg[j]; g[4][#g[4] + 1] = held[j] and 0 or 1
    g[5][#g[5] + 1] = id
    g[6][#g[6] + 1] = row_of[j] or false
  end
end
if n_feat > 0 then redis.call('SET', KEYS[2], blob_encode(bids, bpos, bneg)) end
if #doc_flat > 0 then hset(KEYS[9], doc_flat) end
local first_rank = nil
for _, item in ipairs(items) do
  if first_rank == nil or item.rank < first_rank then first_rank = item.rank end
  if not hourly then
    redis.call('SETRANGE', KEYS[1], 13 + item.rank, string.char(item.code))
  elseif item.rank <= n_shown then
    body = string.sub(body, 1, 13 + item.rank) .. string.char(item.code)
           .. string.sub(body, 15 + item.rank)
  end
  if item.code == 1 then
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
  redis.call('ZADD', KEYS[5], ARGV[7], KEYS[1])
end
redis.call('HSET', KEYS[4], ns, '')
redis.call('HINCRBY', KEYS[6], '', 1)
redis.call('HINCRBY', KEYS[3], '', 1)
if with_edges then write_edges(adj_key, edge_version, at + 1) end
local box_id, box = '', ''
if cluster then
  if pooled[0] then
    local g = pooled[0]
    box_id = rid .. ':' .. first_rank
    box = outbox_entry(g[1], g[5], g[2], g[3], g[4])
    redis.call('HSET', KEYS[8], box_id, box)
  end
else
  if not hourly then redis.call('PERSIST', KEYS[8]) end
  for k, g in pairs(pooled) do pool_add(KEYS[11 + k], g[1], g[2], g[3], g[4], g[5], g[6]) end
end
return {1, box_id, box}
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


def _wrap(base: str, before: str, after: str) -> str:
    """``base`` (a whole script) as the body of ``local function base_script()``, between
    ``before`` and ``after``: the base text runs unchanged."""
    return f"{before}\nlocal function base_script()\n{base}\nend\n{after}"


#: One server: READ_LOCAL, then the adjacency of every document read, as a fourth reply entry.
#: KEYS: READ_LOCAL's, then the adjacency hash (hidden from READ_LOCAL).
READ_WITH_EDGES = _wrap(READ_LOCAL, """
local adj_key = KEYS[#KEYS]
local KEYS = {unpack(KEYS, 1, #KEYS - 1)}""", """
local reply = base_script()
if reply.err then return reply end  -- (GUARD's: the layout moved on)
local nf = tonumber(ARGV[1])
local ids = {}
for j = 1, tonumber(ARGV[nf + 2]) do ids[j] = ARGV[nf + 2 + j] end
if #ids > 0 then reply[4] = redis.call('HMGET', adj_key, unpack(ids)) else reply[4] = {} end
return reply""")
