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
-- with a start or an end (TIME), 5-6 for the first purchase after a
-- persister read the sale (HGET, SADD: see tell, prelude.lua); 1 for a refusal, 2 past the request id
-- check of a sale with a start or an end. Measured in instructions per call
-- with callgrind, which machine load does not move (`scripts/lua-cost.sh`,
-- Redis 7.0.15, the engine's whole library loaded, every call a new buyer
-- and request id):
--   this function, no limit ~58,500; limit 1 ~70,100; a refusal ~33,100
--   (a repeated request id) to ~36,200 (sold out) and ~41,800 (over the
--   limit). The floor under it (lua/floor.lua: the same three commands
--   with the same arguments and no logic) costs ~50,900, and its read alone
--   ~35,700: what remains above the floor is ~7,600 for a purchase and
--   next to nothing for a refusal. Telling the persisters (the field 'q'
--   in the HSET) added ~1,000 to a purchase and nothing to a refusal;
--   a bigger library (the persisters' signals) ~1,000 to every call that
--   allocates, the floor's too. The layout before this one (8 keys,
--   11-12 calls, commit 1ead010) cost ~192,000; a function that returns 1
--   with the same arguments ~18,300, the floor of any call.
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
-- - the HMGET asks only for the fields this purchase needs (~600 each);
-- - numbers written with '%d' (Redis writes a Lua number with '%.17g':
--   -2,000 for the stock left), and a quantity of '1' not parsed (-600);
-- - tonumber (~1,300) and string concatenation (~1,500) only where needed;
-- - a Redis Function (FCALL) rather than EVALSHA: -2,500, and a promoted
--   replica has it (crates/redis/src/library.rs).
-- Reading the end from the hash costs ~2,600 per call (it was an argument,
-- and only for sales with a window): the price of an early end reaching
-- purchasers made before it.
local gen, user, req = ARGV[1], ARGV[2], ARGV[4]
local qty = ARGV[3] == '1' and 1 or tonumber(ARGV[3])
local limit = 0
if ARGV[5] then
  limit = tonumber(ARGV[5])
end
local req_field = req ~= '' and 'r:' .. req
local bought_field = limit > 0 and 'u:' .. user
-- Only the fields this purchase needs: each costs ~600.
local m
if bought_field then
  m = redis.call('HMGET', KEYS[1], 'gen', 'left', 'end', req_field or 'gen', bought_field)
elseif req_field then
  m = redis.call('HMGET', KEYS[1], 'gen', 'left', 'end', req_field)
else
  m = redis.call('HMGET', KEYS[1], 'gen', 'left', 'end')
end
if m[1] ~= gen then
  return 'no_sale'
end
-- The same order as purchase_batch.lua: a repeated request id gets its
-- order back even once the sale has ended.
if req_field and m[4] then
  return m[4]
end
if ARGV[6] or m[3] ~= '0' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if m[3] ~= '0' and now >= tonumber(m[3]) then
    return 'ended'
  end
  if ARGV[6] and now < tonumber(ARGV[6]) then
    return 'not_started'
  end
end
local bought = bought_field and tonumber(m[5] or '0') + qty
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
-- Each write also writes 'q', which disarms the sale (see tell,
-- prelude.lua): HSET counts the fields it added, and one more than this
-- purchase adds (a first buyer's count, a request id) means 'q' was absent,
-- so the sale was armed and the persisters are told. Refusals, most of a
-- flash sale's calls, pay nothing for it.
local added = (bought and not m[5]) and 1 or 0
local entry, now_added
if not req_field then
  entry = redis.call('XADD', KEYS[2], '*', 'b', gen, user, ARGV[3])
  if bought then
    now_added = redis.call('HSET', KEYS[1], 'left', left, bought_field, bought, 'q', '1')
  else
    now_added = redis.call('HSET', KEYS[1], 'left', left, 'q', '1')
  end
else
  entry = redis.call('XADD', KEYS[2], '*', 'b', gen, user, ARGV[3] .. '|' .. req)
  local ref = entry .. '-0|' .. ARGV[3]
  added = added + 1
  if bought then
    now_added = redis.call('HSET', KEYS[1], 'left', left, bought_field, bought, req_field, ref, 'q', '1')
  else
    now_added = redis.call('HSET', KEYS[1], 'left', left, req_field, ref, 'q', '1')
  end
end
if now_added > added then
  local news = redis.call('HGET', KEYS[1], 'n')
  if news then
    redis.pcall('SADD', news, KEYS[1])
  end
end
return entry
