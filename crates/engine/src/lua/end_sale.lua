-- Ends a sale now: no purchase succeeds from here on (pending orders stay
-- payable until their own pay-by time).
-- KEYS: 1 sale hash.
-- ARGV: generation of the sale meant.
-- Returns the end ms now in force (an earlier end stays), or 'no_sale'.
--
-- The purchase scripts read the end from the hash on every call, so
-- purchasers holding the sale's other rules see it at once. A start still
-- ahead moves to just before it, so the sale reads as ended, not upcoming,
-- and its window stays one a sale may have (start before end).
-- Cost: 3 redis.calls, once per sale.
local m = redis.call('HMGET', KEYS[1], 'gen', 'start', 'end')
if m[1] ~= ARGV[1] then
  return 'no_sale'
end
local now = now_ms()
local stop = tonumber(m[3] or '0')
if stop == 0 or stop > now then
  stop = now
end
local start = tonumber(m[2] or '0')
if start >= stop then
  start = stop - 1
end
redis.call('HSET', KEYS[1], 'end', string.format('%d', stop), 'start', string.format('%d', start))
return string.format('%d', stop)
