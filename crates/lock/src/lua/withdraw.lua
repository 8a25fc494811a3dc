-- ARGV: token, keep ("1" or "0"). Takes a waiter out of the queue. If the
-- lock was granted to it meanwhile: with keep=1 returns {fence, pttl} (the
-- caller takes the lock), with keep=0 releases it to the next waiter.
-- Otherwise {0, 0}.
local token = ARGV[1]
local record = redis.call('HGET', KEYS[4], token)
if record then
  redis.call('LREM', KEYS[3], 1, token .. '|' .. record)
  redis.call('HDEL', KEYS[4], token)
end
local fence = owned(token)
if not fence then
  return {0, 0}
end
if ARGV[2] == '1' then
  return {fence, redis.call('PTTL', KEYS[1])}
end
redis.call('DEL', KEYS[1])
hand_on(fence)
return {0, 0}
