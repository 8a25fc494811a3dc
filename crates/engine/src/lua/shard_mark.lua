-- Records whether a sharded sale is drained: pool and every shard empty
-- and no transfer open, as its refiller last saw. Only then do buyers of
-- an empty shard hear "sold out" (shard_want.lua). Units coming back
-- (a cancel, an expiry, stock added) clear it, announced on
-- seckill:restock as any sale's restock is.
-- KEYS: 1 the sale's hash.
-- ARGV: generation, refiller's fence, '1' drained or '0' not, the count of
--       returns (shard_restock.lua) when the refiller read the shards.
-- Returns 'ok', 'returned' (units came back since: not drained), 'fenced',
-- 'no_sale'.
-- Cost: 2-3 redis.calls, when it changes.
local m = redis.call('HMGET', KEYS[1], 'gen', 'fence', 'drained', 'id', 'returns', 'left', 'xopen')
local refusal = refused(m[1], m[2], ARGV[1], ARGV[2])
if refusal then
  return refusal
end
-- Units came back, were added to the pool, or are moving since the
-- refiller looked: not drained.
if ARGV[3] == '1' and ((m[5] or '0') ~= ARGV[4] or m[6] ~= '0' or (m[7] or '') ~= '') then
  return 'returned'
end
redis.call('HSET', KEYS[1], 'drained', ARGV[3], 'fence', ARGV[2])
if m[3] == '1' and ARGV[3] == '0' then
  redis.call('PUBLISH', 'seckill:restock', m[4])
end
return 'ok'
