-- Reads a sharded sale's own hash (settings, pool, open transfer, demand)
-- for its refiller and for snapshots. A function, as shard_read.lua is, so
-- that Redis time per purchase counts it with the function calls, not with
-- the commands buyers send.
-- KEYS: 1 the sale's hash (it holds no buyers' fields: those are on the
--       shards).
-- ARGV: none.
-- Returns the hash as HGETALL does.
-- Cost: 1 redis.call, per refiller round or snapshot.
return redis.call('HGETALL', KEYS[1])
