-- Changes a production-path sale's stock while buyers race: adds units, or
-- sets the stock outright; never below what is sold, never leaving a
-- negative count left. Lands between two purchases, never inside one.
-- KEYS: 1 sale hash.
-- ARGV: generation of the sale meant, 'add' | 'set', units, the most stock.
-- Returns { stock, left } after the change, or 'no_sale' | 'below_sold' |
-- 'too_large' | 'unsupported' (a classic strategy's sale).
-- Units that become available are announced on seckill:restock. A sharded
-- sale's stock is its pool's: a decrease takes only what no shard holds.
-- Cost: 2 redis.calls (3-5 with the announcement), once per change.
local m = redis.call('HMGET', KEYS[1], 'gen', 'inventory', 'stock', 'left', 'drained')
if m[1] ~= ARGV[1] then
  return 'no_sale'
end
if m[2] ~= 'hash' then
  return 'unsupported'
end
local stock, left, n = tonumber(m[3]), tonumber(m[4]), tonumber(ARGV[3])
local sold = stock - left
local new_stock
if ARGV[2] == 'add' then
  new_stock = stock + n
else
  new_stock = n
end
if new_stock < sold then
  return 'below_sold'
end
if new_stock > tonumber(ARGV[4]) then
  return 'too_large'
end
local new_left = new_stock - sold
redis.call('HSET', KEYS[1], 'stock', string.format('%d', new_stock), 'left',
  string.format('%d', new_left))
if new_left > left then
  if m[5] then
    -- A sharded sale (its `left` is the pool) is not drained any more,
    -- and a refiller that read it before this must not say it is.
    redis.call('HSET', KEYS[1], 'drained', '0')
    redis.call('HINCRBY', KEYS[1], 'returns', 1)
  end
  redis.call('PUBLISH', 'seckill:restock', redis.call('HGET', KEYS[1], 'id'))
end
return { new_stock, new_left }
