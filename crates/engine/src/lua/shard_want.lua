-- A buyer found its home shard empty: answers whether the whole sale is
-- drained (so "sold out" is true), and otherwise counts the demand, which
-- the refiller answers with units from the pool or other shards.
-- KEYS: 1 the sale's hash.
-- ARGV: generation, the shard's index.
-- Returns 'drained', 'wait', 'no_sale'.
-- Cost: 1-2 redis.calls, only for a buyer refused by an empty shard.
local m = redis.call('HMGET', KEYS[1], 'gen', 'drained')
if m[1] ~= ARGV[1] then
  return 'no_sale'
end
if m[2] == '1' then
  return 'drained'
end
redis.call('HINCRBY', KEYS[1], 'w:' .. ARGV[2], 1)
return 'wait'
