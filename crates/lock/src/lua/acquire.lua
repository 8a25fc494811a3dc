-- ARGV: token, lease ms, wait ms (0 = do not queue), notification channel.
-- Returns {1, fence} when granted, else {0, pttl of the current holder}.
-- Sent twice (a cluster client resends after a dropped connection), it
-- answers the grant it already made instead of queueing the holder.
-- Cost: free, 4 calls (EXISTS, TIME, SET … GET, SET); held, queueing, 7
-- (EXISTS, GET, TIME, HSETNX, RPUSH, PTTL, PTTL; +2 PEXPIRE when it
-- extends the queue: keep_queue).
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
-- Queued once: a resend finds its record.
if wait > 0 then
  local record = string.format('%s|%d|%s', lease, now_ms() + wait, ARGV[4])
  if redis.call('HSETNX', KEYS[4], token, record) == 1 then
    redis.call('RPUSH', KEYS[3], token .. '|' .. record)
    keep_queue(KEYS[3], KEYS[4], wait)
  end
end
return {0, redis.call('PTTL', KEYS[1])}
