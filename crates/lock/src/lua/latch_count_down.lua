-- No ARGV. Counts down by one; at zero the latch opens and its waiters are
-- told. Returns what is left (0 once open; an open latch stays open).
local left = tonumber(redis.call('GET', KEYS[1]) or 0)
if left <= 1 then
  open()
  return 0
end
return redis.call('DECR', KEYS[1])
