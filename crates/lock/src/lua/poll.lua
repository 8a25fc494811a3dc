-- ARGV: token. A waiter's check when no notification came in time (the
-- holder expired, or the notification was lost). Frees an expired lock for
-- the queue first. Returns {1, fence, pttl} when the lock is the caller's,
-- {0, pttl} while it is still queued, {-1, pttl} when it is no longer queued
-- (a grant expired unseen) and must queue again.
local token = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 0 then
  handoff()
end
local fence = owned(token)
if fence then
  return {1, fence, redis.call('PTTL', KEYS[1])}
end
if redis.call('HEXISTS', KEYS[4], token) == 0 then
  return {-1, redis.call('PTTL', KEYS[1])}
end
return {0, redis.call('PTTL', KEYS[1])}
