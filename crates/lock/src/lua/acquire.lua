-- ARGV: token, lease ms, wait ms (0 = do not queue), notification channel.
-- Returns {1, fence} when granted, else {0, pttl of the current holder}.
-- Sent twice (a cluster client resends after a dropped connection), it
-- answers the grant it already made instead of queueing the holder.
local token, lease, wait = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- EXISTS counts a key named twice twice: 0 free, 1 free with waiters,
-- 2 or 3 held, in one call.
local present = redis.call('EXISTS', KEYS[1], KEYS[1], KEYS[3])
-- A free lock with waiters means its holder expired: they go first.
if present == 0 or (present == 1 and not handoff()) then
  return {1, grant(token, lease)}
end
local fence = owned(token)
if fence then
  return {1, fence}
end
if wait > 0 and redis.call('HEXISTS', KEYS[4], token) == 0 then
  redis.call('RPUSH', KEYS[3], token)
  redis.call('HSET', KEYS[4], token, string.format('%s|%s|%d', ARGV[4], lease, now_ms() + wait))
  if redis.call('PTTL', KEYS[3]) < wait then
    redis.call('PEXPIRE', KEYS[3], wait)
    redis.call('PEXPIRE', KEYS[4], wait)
  end
end
return {0, redis.call('PTTL', KEYS[1])}
