-- Units came back to a shard of a sharded sale (a cancel, an expiry): the
-- sale is not drained any more, from this call on. Counting the returns
-- lets a refiller that read the shards before them see that its "drained"
-- is out of date (shard_mark.lua refuses it).
-- KEYS: 1 the sale's hash.
-- ARGV: generation.
-- Returns 'ok' or 'no_sale'.
-- Cost: 2-4 redis.calls, per cancel or expiry round that returned units.
local m = redis.call('HMGET', KEYS[1], 'gen', 'drained', 'id')
if m[1] ~= ARGV[1] then
  return 'no_sale'
end
redis.call('HINCRBY', KEYS[1], 'returns', 1)
if m[2] == '1' then
  redis.call('HSET', KEYS[1], 'drained', '0')
  redis.call('PUBLISH', 'seckill:restock', m[3])
end
return 'ok'
