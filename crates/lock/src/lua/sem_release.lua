-- ARGV: permit ("<token>:<i>"), the caller's number of permits. Returns
-- the permit and hands on; 1 when it was held, 0 when its lease had ended.
-- The holders' expiry is left as it is: it ends with the longest lease
-- granted, a moment later than needed at most.
local now = now_ms()
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
local returned = 0
if held and tonumber(held) > now then
  returned = 1
end
redis.call('ZREM', KEYS[1], ARGV[1])
prune(now)
handoff(now, limit(ARGV[2]))
return returned
