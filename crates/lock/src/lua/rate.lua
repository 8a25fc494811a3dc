-- rate: one decision of a GCRA rate limiter (generic cell rate algorithm).
-- KEYS: 1 the limiter's theoretical arrival time (TAT), in µs of the
--       server's clock; it expires when the TAT passes (the limiter is full
--       again), so an idle limiter keeps no key.
-- ARGV: 1 emission interval in µs (1 / rate; may have a fraction),
--       2 burst (cells admitted at once from full), 3 cells asked for.
-- Returns {admitted (1/0), cells left now, µs to wait before the cells
-- asked for would be admitted (0 when admitted), µs until full again, the
-- server's clock in µs}.
-- Cost: TIME, GET, and SET when admitted: O(1).
local interval, burst, cells = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0)
if tat < now then
  tat = now
end
local limit = burst * interval
local new_tat = tat + cells * interval
if new_tat - now > limit then
  local left = math.floor((limit - (tat - now)) / interval)
  return {0, left, math.ceil(new_tat - limit - now), math.ceil(tat - now), now}
end
redis.call('SET', KEYS[1], string.format('%.3f', new_tat), 'PX', math.max(1, math.ceil((new_tat - now) / 1000)))
local left = math.floor((limit - (new_tat - now)) / interval)
return {1, left, 0, math.ceil(new_tat - now), now}
