-- Signs a batch a persister takes over (takeover.rs) as its own, if it is
-- still recorded: its reader's commit may have cleared it since it was
-- listed, and a record written back would count as unpersisted until
-- taken again. The write lets a WAIT after it cover the purchases before
-- it, which the batch's XRANGE alone would not on every Redis version.
-- KEYS: 1 the sale's persisting hash.
-- ARGV: the batch's first id, then its record as the taker writes it.
-- Returns 1 if signed, 0 if the batch is gone (committed).
-- Cost: HEXISTS, +HSET.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
