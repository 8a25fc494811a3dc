-- ARGV: token, r or w, lease ms, wait ms (0 = do not queue), channel.
-- Returns {1, fence, ms left of the lease} when granted, else
-- {0, ms until a holder's lease ends or -1}. Sent twice (a cluster client
-- resends after a dropped connection), it answers the grant it made.
local token, kind, lease, wait = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local ms, us = now()
prune(ms)
-- Handed on before the look: a resend whose first run queued it may be
-- the waiter this hand-off serves, and must find that grant, not take a
-- second one below.
handoff(ms, us)
local fence, left = held(token, kind, ms)
if fence then
  tidy(ms)
  return {1, fence, left}
end
-- Nobody waits (an empty list is no key) and no writer holds it.
local free = redis.call('EXISTS', KEYS[4], KEYS[2]) == 0
if free and (kind == 'r' or redis.call('ZCARD', KEYS[1]) == 0) then
  fence = grant(token, kind, lease, ms, us)
  tidy(ms)
  return {1, fence, lease}
end
-- Queued once: a resend finds its record.
if wait > 0 then
  local record = string.format('%d|%d|%s|%s', lease, ms + wait, kind, ARGV[5])
  if redis.call('HSETNX', KEYS[5], token, record) == 1 then
    redis.call('RPUSH', KEYS[4], token .. '|' .. record)
    keep_queue(KEYS[4], KEYS[5], wait)
  end
end
tidy(ms)
return {0, next_end(ms)}
