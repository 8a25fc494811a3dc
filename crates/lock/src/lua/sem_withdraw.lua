-- ARGV: token, permits, the caller's number of permits. A waiter gives up:
-- leaves the queue, and returns the permits if they were granted meanwhile
-- (the caller no longer wants them). Returns 1 if they had been granted.
local token, n = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local record = redis.call('HGET', KEYS[3], token)
if record then
  redis.call('LREM', KEYS[2], 1, token .. '|' .. record)
  redis.call('HDEL', KEYS[3], token)
end
local granted = 0
if redis.call('ZSCORE', KEYS[1], token .. ':1') then
  granted = 1
  for i = 1, n do
    redis.call('ZREM', KEYS[1], token .. ':' .. i)
  end
end
prune(now)
handoff(now, nil, ARGV[3])
return granted
