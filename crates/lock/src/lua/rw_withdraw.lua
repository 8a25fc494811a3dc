-- ARGV: token, r or w. A waiter gives up: leaves the queue, and releases
-- the lock if it was granted meanwhile. Returns 1 if it had been granted.
local token, kind = ARGV[1], ARGV[2]
local ms, us = now()
-- Asked while its record is there: a waiter's record spares held a scan.
local fence = held(token, kind, ms)
local record = redis.call('HGET', KEYS[5], token)
if record then
  redis.call('LREM', KEYS[4], 1, token .. '|' .. record)
  redis.call('HDEL', KEYS[5], token)
end
if fence then
  local id = string.format('%s:%d', token, fence)
  if kind == 'w' then
    redis.call('DEL', KEYS[2])
  else
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[6], token)
  end
end
prune(ms)
handoff(ms, us)
tidy(ms)
if fence then
  return 1
end
return 0
