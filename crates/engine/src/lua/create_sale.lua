-- Creates a sale, or one shard of a sharded sale.
-- KEYS: 1 sale hash  2 counter (the classic strategies' stock key)  3 token list.
-- ARGV: id, name, stock, limit (0 = none), start ms (0 = none), end ms
--       (0 = none), inventory ('hash' | 'counter' | 'list'), payment timeout s,
--       then for a sharded sale: 9 its generation ('' = now, for the sale
--       itself; a shard takes its sale's), 10 its shards' tags
--       ('1,7,12'; '' for a shard).
-- Returns the sale's generation (creation time in ms), or 0 if it exists.
-- Cost: 3-4 redis.calls, once per sale (the list inventory more).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local gen
if ARGV[9] and ARGV[9] ~= '' then
  gen = tonumber(ARGV[9])
else
  local t = redis.call('TIME')
  gen = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'name', ARGV[2], 'stock', ARGV[3], 'limit', ARGV[4],
  'start', ARGV[5], 'end', ARGV[6], 'inventory', ARGV[7], 'payment_timeout', ARGV[8],
  'gen', string.format('%d', gen))
if ARGV[10] and ARGV[10] ~= '' then
  -- A sharded sale: `left` is its pool; transfers are numbered from 1.
  redis.call('HSET', KEYS[1], 'shards', ARGV[10], 'xseq', '0', 'fence', '0', 'drained', '0')
end
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
