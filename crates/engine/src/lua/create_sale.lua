-- Creates a sale.
-- KEYS: 1 sale hash  2 counter (the classic strategies' stock key)  3 token list.
-- ARGV: id, name, stock, limit (0 = none), start ms (0 = none), end ms
--       (0 = none), inventory ('hash' | 'counter' | 'list'), payment timeout s.
-- Returns the sale's generation (creation time in ms), or 0 if it exists.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local t = redis.call('TIME')
local gen = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'name', ARGV[2], 'stock', ARGV[3], 'limit', ARGV[4],
  'start', ARGV[5], 'end', ARGV[6], 'inventory', ARGV[7], 'payment_timeout', ARGV[8],
  'gen', string.format('%d', gen))
local stock = tonumber(ARGV[3])
if ARGV[7] == 'hash' then
  redis.call('HSET', KEYS[1], 'left', ARGV[3])
elseif ARGV[7] == 'list' then
  -- The list strategy's tokens, pushed in chunks to stay within unpack()'s limits.
  local chunk = {}
  for i = 1, 1000 do chunk[i] = '1' end
  local left = stock
  while left > 0 do
    local n = math.min(left, 1000)
    if n < 1000 then
      chunk = {}
      for i = 1, n do chunk[i] = '1' end
    end
    redis.call('RPUSH', KEYS[3], unpack(chunk))
    left = left - n
  end
else
  redis.call('SET', KEYS[2], stock)
end
return gen
