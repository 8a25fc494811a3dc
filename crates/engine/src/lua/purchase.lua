-- One purchase (the `atomic` strategy).
-- KEYS: 1 sale hash  2 order stream (layout: keys.rs).
-- ARGV: generation, user, quantity, request id ('' = none), then, only for
--       a sale with a per-user limit or a start time, its limit (0 = none),
--       then, only for a sale with a start time, its start ms.
--       The end is read from the sale's hash ('0' = none), since ending a
--       sale early moves it while purchasers hold their arguments.
-- Returns the new order's stream entry id "<ms>-<n>" (the order is number 0
-- of that entry), the stored "<ms>-<n>-<i>|<qty>" of the earlier purchase
-- with this request id, or 'sold_out' | 'limit' | 'not_started' | 'ended' |
-- 'no_sale' (no sale of this generation).
--
-- Checks, in purchase_batch.lua's order: generation, request id, window,
-- limit, stock.
-- Cost: 3 redis.calls for a purchase (HMGET, XADD, HSET), 4 for a sale
-- with a start or an end (TIME); 1 for a refusal, 2 past the request id
-- check of a sale with a start or an end. Measured in instructions per call
-- with callgrind, which machine load does not move (`scripts/lua-cost.sh`,
-- Redis 7.0.15, every call a new buyer and request id):
--   this script, no limit ~63,000; limit 1 ~72,000; a refusal ~38,000
--   (sold out, a repeated request id) to ~44,000 (over the limit); the layout before it
--   (8 keys, 11-12 calls, commit 1ead010) ~192,000; EVALSHA of `return 1`
--   with the same arguments ~19,000, the floor of any script here.
--   Reading the end from the hash costs ~2,700-3,300 of that per call (it
--   was an argument, and only for sales with a window): the price of an
--   early end reaching purchasers made before it.
-- What the choices are worth, measured the same way while building it:
-- - each redis.call costs ~3,900 beyond its command, so what a purchase
--   reads is in one hash read by one HMGET, and what it writes goes back in
--   one HSET;
-- - no sequence counter and no per-order state at purchase: the order id
--   is the stream entry id, and a pending order is its purchase entry;
-- - limit and start come as arguments, and only for sales that have them
--   (they never change within a generation, which is checked); each
--   argument costs ~800, and a limit without a start sends one, not two;
-- - a buyer's count is kept only when the sale has a limit: with the
--   previous point, -14,000 for a sale without rules;
-- - TIME only for a sale with a start or an end: the pay-by time is the
--   entry id's time plus the payment timeout;
-- - tonumber (~1,300) and string concatenation (~1,500) only where needed;
-- - EVALSHA, not FCALL: a Redis Function saved ~3,400 but would have to be
--   loaded on every server and node.
local gen, user, req = ARGV[1], ARGV[2], ARGV[4]
local qty = tonumber(ARGV[3])
local limit = 0
if ARGV[5] then
  limit = tonumber(ARGV[5])
end
local req_field = req ~= '' and 'r:' .. req
local bought_field = limit > 0 and 'u:' .. user
local m = redis.call('HMGET', KEYS[1], 'gen', 'left', req_field or 'gen', bought_field or 'gen',
  'end')
if m[1] ~= gen then
  return 'no_sale'
end
-- The same order as purchase_batch.lua: a repeated request id gets its
-- order back even once the sale has ended.
if req_field and m[3] then
  return m[3]
end
if ARGV[6] or m[5] ~= '0' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if m[5] ~= '0' and now >= tonumber(m[5]) then
    return 'ended'
  end
  if ARGV[6] and now < tonumber(ARGV[6]) then
    return 'not_started'
  end
end
local bought = bought_field and tonumber(m[4] or '0') + qty
if bought and bought > limit then
  return 'limit'
end
local left = tonumber(m[2]) - qty
if left < 0 then
  return 'sold_out'
end
if not req_field then
  local entry = redis.call('XADD', KEYS[2], '*', 'b', gen, user, ARGV[3])
  if bought then
    redis.call('HSET', KEYS[1], 'left', left, bought_field, bought)
  else
    redis.call('HSET', KEYS[1], 'left', left)
  end
  return entry
end
local entry = redis.call('XADD', KEYS[2], '*', 'b', gen, user, ARGV[3] .. '|' .. req)
local ref = entry .. '-0|' .. ARGV[3]
if bought then
  redis.call('HSET', KEYS[1], 'left', left, bought_field, bought, req_field, ref)
else
  redis.call('HSET', KEYS[1], 'left', left, req_field, ref)
end
return entry
