-- One purchase (the `atomic` strategy): a batch of one of purchase_batch.lua,
-- answered alike, and what it costs is the floor's (lua/floor.lua) plus little.
-- KEYS: 1 sale hash  2 order stream (layout: keys.rs).
-- ARGV: generation, user, quantity, request id ('' = none), then, only for
--       a sale with them, its limit (0 = none) and start ms (codec/purchase.rs).
--       The end is read from the hash: ending a sale early moves it.
-- Returns the new order's entry id "<ms>-<n>" (order 0 of that entry), the
-- stored "<ms>-<n>-<i>|<qty>" of this buyer's earlier purchase with this
-- request id (field "r:<user>/<request id>"), or
-- 'sold_out' | 'limit' | 'not_started' | 'ended' | 'no_sale'.
-- Checks, in purchase_batch.lua's order: generation, request id, window, limit, stock.
-- Cost: 3 redis.calls (HMGET, XADD, HSET; HMGET, HSET for a repeated
-- request id), +1 TIME with a start or end, +1 on a sale a persister armed
-- (tell's XADD: prelude.lua); callgrind counts: scripts/lua-cost.sh.
local gen, user, req = ARGV[1], ARGV[2], ARGV[4]
local qty = ARGV[3] == '1' and 1 or tonumber(ARGV[3])
local limit = 0
if ARGV[5] then
  limit = tonumber(ARGV[5])
end
-- A request id is the buyer's own: another buyer sending the same one
-- makes a purchase of its own, and never learns of this one's order.
local req_field = req ~= '' and 'r:' .. user .. '/' .. req
local bought_field = limit > 0 and 'u:' .. user
-- Only the fields this purchase needs: each costs ~600, and a fifth makes
-- the reply's table grow. `n` says whether a persister armed the sale, and
-- how to tell it (see tell, prelude.lua). Read here, it spares a quiet
-- sale's purchase the look of its own it took when a mark `q`, written by
-- each purchase and deleted by the arming, said when to look (an HGET,
-- and an HDEL to delete the mark again): 98,925 to 90,531 instructions
-- (lua-cost.sh, limit 1, armed, one run). A busy sale's purchase pays the
-- field and writes no mark (57,784 to 58,377 with no limit, 68,832 to
-- 68,651 with limit 1); a refusal pays the field: 35,071 to 36,973 sold
-- out, 41,713 to 42,877 over a limit, 36,933 to 39,086 for a repeated
-- request id. Refusals are most of a hot sale's calls, but the service
-- answers most sold-out ones from its marks without a call.
local m
if bought_field then
  m = redis.call('HMGET', KEYS[1], 'gen', 'left', 'end', 'n', req_field or 'gen', bought_field)
elseif req_field then
  m = redis.call('HMGET', KEYS[1], 'gen', 'left', 'end', 'n', req_field)
else
  m = redis.call('HMGET', KEYS[1], 'gen', 'left', 'end', 'n')
end
if m[1] ~= gen then
  return 'no_sale'
end
-- The same order as purchase_batch.lua: a repeated request id gets its
-- order back even once the sale has ended, and writes its record again. A
-- retry follows an answer no replica confirmed, and may come on another
-- connection: a WAIT counts only its connection's writes, so it confirms
-- the order only after a write made after the order.
if req_field and m[5] then
  redis.call('HSET', KEYS[1], req_field, m[5])
  return m[5]
end
if ARGV[6] or m[3] ~= '0' then
  local now = now_ms()
  if m[3] ~= '0' and now >= tonumber(m[3]) then
    return 'ended'
  end
  if ARGV[6] and now < tonumber(ARGV[6]) then
    return 'not_started'
  end
end
local bought = bought_field and tonumber(m[6] or '0') + qty
if bought and bought > limit then
  return 'limit'
end
local left = tonumber(m[2]) - qty
if left < 0 then
  return 'sold_out'
end
-- Redis would write these numbers with '%.17g', far dearer than '%d'.
left = string.format('%d', left)
bought = bought and string.format('%d', bought)
-- The order's quantity, with its request id when it has one: the
-- entry's value, and the ledger's when told.
local value = req_field and ARGV[3] .. '|' .. req or ARGV[3]
local entry = redis.call('XADD', KEYS[2], '*', 'b', gen, user, value)
if not req_field then
  if bought then
    redis.call('HSET', KEYS[1], 'left', left, bought_field, bought)
  else
    redis.call('HSET', KEYS[1], 'left', left)
  end
else
  local ref = entry .. '-0|' .. ARGV[3]
  if bought then
    redis.call('HSET', KEYS[1], 'left', left, bought_field, bought, req_field, ref)
  else
    redis.call('HSET', KEYS[1], 'left', left, req_field, ref)
  end
end
if m[4] then
  tell(m[4], KEYS[1], KEYS[2], entry, 'b', gen, user, value)
end
return entry
