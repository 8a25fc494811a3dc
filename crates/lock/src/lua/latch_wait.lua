-- ARGV: token, channel, wait ms (0: only ask). Returns 1 if the latch is
-- open; else registers the waiter (unless only asking) and returns 0.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
local wait = tonumber(ARGV[3])
if wait > 0 then
  redis.call('HSET', KEYS[2], ARGV[1], string.format('%s|%d', ARGV[2], now_ms() + wait))
  if redis.call('PTTL', KEYS[2]) < wait then
    redis.call('PEXPIRE', KEYS[2], wait)
  end
end
return 0
