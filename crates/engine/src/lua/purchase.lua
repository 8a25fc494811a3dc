-- One purchase (the `atomic` strategy).
-- KEYS: 1 sale hash  2 order stream (layout: keys.rs).
-- ARGV: generation, user, quantity, request id ('' = none), and, only for a
--       sale with a per-user limit or a window: limit (0 = none), start ms,
--       end ms (0 = none).
-- Returns the new order's stream entry id "<ms>-<n>" (the order is number 0
-- of that entry), the stored "<ms>-<n>-<i>|<qty>" of the earlier purchase
-- with this request id, or 'sold_out' | 'limit' | 'not_started' | 'ended' |
-- 'no_sale' (no sale of this generation).
--
-- Cost, Redis 7.0.15 (instructions from callgrind, the steadiest measure on
-- a noisy machine; ~7,000 instructions per µs here): a purchase is 3
-- redis.calls (HMGET, XADD, HSET), 4 with a window (TIME); a refusal is 1.
-- What each choice saved, measured the same way:
-- - each redis.call costs ~3,900 instructions beyond its command, so
--   what a purchase reads is in one hash read by one HMGET, and what it
--   writes goes back in one HSET: the old layout (8 keys, 11-12 calls)
--   cost 27-33 µs a purchase, this one ~8 (60,000 instructions; EVALSHA of
--   `return 1` with the same arguments is 22,000);
-- - no sequence counter: the order id is the stream entry id, and a pending
--   order is nothing but its purchase entry, so nothing else is stored per
--   order until it is paid, cancelled or expired (-14,000);
-- - limit and window come as arguments, and only for sales that have them:
--   they never change within a generation, which is checked, and every
--   argument costs ~800 instructions (-1,500 against always sending them);
-- - a buyer's count is kept only when the sale has a limit: a new hash
--   field costs ~4,000 (-7,500 for a sale without a limit);
-- - TIME only for a sale with a window: the pay-by time is the entry id's
--   time plus the payment timeout;
-- - tonumber (~1,300 each) and string concatenation (~1,500 each) only
--   where the value is needed;
-- - EVALSHA, not FCALL: a Redis Function saved ~3,400 instructions but
--   would need loading on every server and node; not worth it here.
local gen, user, req = ARGV[1], ARGV[2], ARGV[4]
local qty = tonumber(ARGV[3])
local limit = 0
if ARGV[5] then
  limit = tonumber(ARGV[5])
  local start, stop = tonumber(ARGV[6]), tonumber(ARGV[7])
  if start > 0 or stop > 0 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if now < start then
      return 'not_started'
    end
    if stop > 0 and now >= stop then
      return 'ended'
    end
  end
end
local req_field = req ~= '' and 'r:' .. req
local bought_field = limit > 0 and 'u:' .. user
local m = redis.call('HMGET', KEYS[1], 'gen', 'left', req_field or 'gen', bought_field or 'gen')
if m[1] ~= gen then
  return 'no_sale'
end
if req_field and m[3] then
  return m[3]
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
