-- ARGV: token, channel, wait ms (0: only ask). Returns 1 if the latch is
-- open, or opened since this waiter was registered (open() marked it
-- told: the latch may have been set again since, and its message lost);
-- else registers the waiter (unless only asking) and returns 0. A record
-- gone for another reason (expired, or lost with a failover) is no
-- opening: the waiter waits on.
-- Cost: EXISTS, then HDEL, or TIME, HSET, PTTL (+PEXPIRE), or HGET (+HDEL).
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
local wait = tonumber(ARGV[3])
if wait > 0 then
  redis.call('HSET', KEYS[2], ARGV[1], string.format('%s|%d', ARGV[2], now_ms() + wait))
  if redis.call('PTTL', KEYS[2]) < wait + 1000 then
    redis.call('PEXPIRE', KEYS[2], wait + 1000)
  end
  return 0
end
if redis.call('HGET', KEYS[2], ARGV[1]) == 'o' then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
return 0
