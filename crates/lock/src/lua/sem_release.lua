-- ARGV: permit ("<token>:<i>"), the caller's number of permits. Returns
-- the permit and hands on; 1 when it was held, 0 when its lease had ended
-- (the leases that ended go first, so it is no longer there to remove).
-- The holders' expiry is left as it is: it ends with the longest lease
-- granted, a moment later than needed at most.
local now = now_ms()
prune(now)
local returned = redis.call('ZREM', KEYS[1], ARGV[1])
handoff(now, nil, ARGV[2])
return returned
