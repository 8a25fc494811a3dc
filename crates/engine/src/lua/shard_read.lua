-- Reads what a refiller and a snapshot need of one shard. A function, not
-- a plain HMGET, so tools that add up Redis time per purchase (script calls
-- plus a strategy's plain commands) count it as the refiller's other calls
-- are counted; a plain HMGET could not be told from a purchase's own.
-- KEYS: 1 the shard's hash.
-- ARGV: none.
-- Returns gen, stock, left, last transfer given, last transfer taken, units
-- it took (nil where unset).
-- Cost: 1 redis.call, per shard per refiller round or snapshot.
return redis.call('HMGET', KEYS[1], 'gen', 'stock', 'left', 'xin', 'xout', 'xout_n')
