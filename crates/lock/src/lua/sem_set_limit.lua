-- ARGV: permits, ms to keep the setting at least. Sets the number of
-- permits for every client while the semaphore is in use (and at least
-- that long), after handing on what a larger number frees (the queue left
-- then says how long it is in use). Returns the permits held now.
local now = now_ms()
prune(now)
handoff(now, tonumber(ARGV[1]), nil, true)
local keep = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]), tonumber(ARGV[2]))
redis.call('SET', KEYS[4], ARGV[1], 'PX', keep)
return redis.call('ZCARD', KEYS[1])
