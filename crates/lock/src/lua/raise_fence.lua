-- ARGV: floor. Makes every later fence above `floor`: for Redlock, lifts
-- this master to the fence the quorum agreed on, so any later quorum
-- (which overlaps this one) counts past it; for data fenced by a lock whose
-- keys were lost. A floor the server's clock has passed needs no key after
-- the lock's lease; one ahead of it is kept until the clock passes it.
local floor = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current < floor then
  local keep = math.max(ms_ahead(floor, now_us()), redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]), 1)
  redis.call('SET', KEYS[2], string.format('%d', floor), 'PX', keep)
end
return 1
