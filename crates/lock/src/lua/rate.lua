-- rate: decisions of GCRA rate limiters (generic cell rate algorithm), as
-- many as a client batched (rate.rs), taken in order at one instant.
-- KEYS: each limiter's theoretical arrival time (TAT), in µs of the
--       server's clock; it expires when the TAT passes (the limiter is full
--       again), so an idle limiter keeps no key.
-- ARGV: per decision 4 values: its key's index in KEYS (from 1), the
--       emission interval in µs (1 / rate; may have a fraction), the burst
--       (cells admitted at once from full), the cells asked for.
-- Returns per decision 4 integers: admitted (1/0), cells left after it, µs
-- to wait before the cells asked for would be admitted (0 when admitted),
-- µs until full again; then the server's clock in µs.
-- Cost: TIME, then per limiter one GET, and one SET per admission: a batch
-- of decisions on one hot limiter, where most are refused, costs a few
-- calls in all.
local now = now_us()
-- tats[k]: key k's TAT as far as this batch went, kept only for a later
-- decision to find; `out` sized for the usual batch of one.
local tats, out, n, last = {}, {0, 0, 0, 0, 0}, 0, #ARGV - 3
for i = 1, last, 4 do
  local k = tonumber(ARGV[i])
  local interval = tonumber(ARGV[i + 1])
  local limit = ARGV[i + 2] * interval
  local tat = tats[k]
  if not tat then
    tat = tonumber(redis.call('GET', KEYS[k]) or 0)
    if tat < now then
      tat = now
    end
  end
  local new_tat = tat + ARGV[i + 3] * interval
  if new_tat - now > limit then
    out[n + 1], out[n + 3] = 0, math.ceil(new_tat - limit - now)
  else
    tat = new_tat
    redis.call('SET', KEYS[k], string.format('%.3f', tat), 'PX', math.max(1, math.ceil((tat - now) / 1000)))
    out[n + 1], out[n + 3] = 1, 0
  end
  out[n + 2] = math.floor((limit - (tat - now)) / interval)
  out[n + 4] = math.ceil(tat - now)
  n = n + 4
  if i < last then
    tats[k] = tat
  end
end
out[n + 1] = now
return out
