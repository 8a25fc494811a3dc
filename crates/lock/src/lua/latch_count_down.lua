-- ARGV: this count-down's token, or '' from a client that never sends a
-- call twice (one server's). Counts down by one; at zero the latch opens
-- and its waiters are told. A token already counted (the same count-down
-- sent again after a dropped connection) counts nothing. Returns what is
-- left (0 once open; an open latch stays open).
-- Cost: GET, DECR; with a token +SADD, PTTL, PEXPIRE; at zero open().
local left = tonumber(redis.call('GET', KEYS[1]) or 0)
if ARGV[1] ~= '' and left > 0 and redis.call('SADD', KEYS[3], ARGV[1]) == 0 then
  return left
end
if left <= 1 then
  open()
  return 0
end
if ARGV[1] ~= '' then
  redis.call('PEXPIRE', KEYS[3], math.max(1, redis.call('PTTL', KEYS[1])))
end
return redis.call('DECR', KEYS[1])
