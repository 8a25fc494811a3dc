-- ARGV: permit ("<token>:<i>"), lease ms. Renews a permit whose lease has
-- not ended: 1, else 0 (it returned, and may be someone else's now).
local now = now_ms()
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not held or tonumber(held) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
if redis.call('EXISTS', KEYS[4]) == 1 then
  keep_limit()
end
return 1
