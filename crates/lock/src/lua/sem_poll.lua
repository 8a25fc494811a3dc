-- ARGV: token, the caller's number of permits. A waiter asks after a
-- notification it may have missed: returns permits that ended meanwhile,
-- hands on, and answers {1, 0, ms left of its lease} when it holds its
-- permits, {0, ms until the first lease ends or -1} while it waits, and
-- {-1, 0} when it is neither queued nor holding (its deadline passed).
local token = ARGV[1]
local now = now_ms()
prune(now)
handoff(now, nil, ARGV[2])
local score = redis.call('ZSCORE', KEYS[1], token .. ':1')
if score then
  return {1, 0, tonumber(score) - now}
end
if redis.call('HEXISTS', KEYS[3], token) == 1 then
  return {0, next_end(now)}
end
return {-1, 0}
