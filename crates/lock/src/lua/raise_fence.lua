-- ARGV: floor. Redlock: lifts this master's fence counter to the fence the
-- quorum agreed on, so any later quorum (which overlaps this one) counts past it.
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[2], ARGV[1])
end
return 1
