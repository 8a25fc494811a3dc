-- ARGV: token, channel, wait ms (0: only ask). Returns 1 if the latch is
-- open, or opened since this waiter was registered (open() forgot it: the
-- latch may have been set again since, and its message lost); else
-- registers the waiter (unless only asking) and returns 0. The waiters
-- live a little longer than the last wait (up to a second more), so a
-- waiter asking at its deadline is not taken for one that was told.
-- Cost: EXISTS, then HDEL, or TIME, HSET, PTTL (+PEXPIRE), or HEXISTS.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
local wait = tonumber(ARGV[3])
if wait > 0 then
  redis.call('HSET', KEYS[2], ARGV[1], string.format('%s|%d', ARGV[2], now_ms() + wait))
  if redis.call('PTTL', KEYS[2]) < wait then
    redis.call('PEXPIRE', KEYS[2], wait + math.min(wait, 1000))
  end
  return 0
end
return 1 - redis.call('HEXISTS', KEYS[2], ARGV[1])
