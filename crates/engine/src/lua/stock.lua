-- Changes a production-path sale's stock while buyers race: adds units, or
-- sets the stock outright; never below what is sold (paid or awaiting
-- payment), never leaving a negative count of units left.
-- KEYS: 1 sale hash.
-- ARGV: generation of the sale meant, 'add' | 'set', units, the most
--       stock a sale may have.
-- Returns { stock, left } after the change, or 'no_sale' | 'below_sold'
-- (the new stock would be below what is sold) | 'too_large' (above the
-- most) | 'unsupported' (a sale of a classic strategy, whose stock lives
-- elsewhere).
--
-- Atomic with every purchase: a purchase reads and writes `left` in one
-- script, so the change lands between two purchases, never inside one.
-- Units that become available are announced on seckill:restock, as a
-- cancelled order's are, for services that remember a sale sold out.
-- Cost: 2 redis.calls (3-5 with the announcement), once per change.
-- A sharded sale's stock is its pool's: the change lands there, and a
-- decrease can take only what no shard holds.
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
