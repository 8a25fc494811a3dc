-- rate: decisions of GCRA rate limiters (generic cell rate algorithm), as
-- many as a client batched (rate.rs), taken in order at one instant.
-- KEYS: each limiter's theoretical arrival time (TAT), in µs of the
--       server's clock; it expires when the TAT passes (the limiter is full
--       again), so an idle limiter keeps no key.
-- ARGV: per decision 4 values: its key's index in KEYS (from 1), the
--       emission interval in µs (1 / rate, rounded up; may have a
--       fraction), the burst (cells admitted at once from full), the cells
--       asked for.
-- Returns per decision 4 integers: admitted (1/0), cells left after it, µs
-- to wait before the cells asked for would be admitted (0 when admitted),
-- µs until full again; then the server's clock in µs.
-- Cost: TIME, then per limiter one GET, and one SET per admission: a batch
-- of decisions on one hot limiter, where most are refused, costs a few
-- calls in all.
local now = now_us()
-- TATs are kept relative to `now` (µs ahead of it, 0 when full): an
-- absolute one (~1.8e15 µs) is a double that steps by 0.25 µs, so adding an
-- interval of 1.111111 µs to it would add 1.0 and admit 11 % too many.
-- Stored as whole µs and a fraction (ahead/store). Each decision admits
-- within 1e-12 of the limit, as summed intervals may land a hair above
-- the product.
local function ahead(stored)
  local whole, part = string.match(stored or '', '^(%d+)(.*)$')
  if not whole then
    return 0
  end
  local tat = (tonumber(whole) - now) + (tonumber(part) or 0)
  return tat > 0 and tat or 0
end
-- The fraction rounded up, so a stored TAT is never early.
local function store(tat)
  local whole = math.floor(tat)
  local frac = math.ceil((tat - whole) * 1000000)
  if frac >= 1000000 then
    whole, frac = whole + 1, 0
  end
  if frac == 0 then
    return string.format('%.0f', now + whole)
  end
  return string.format('%.0f.%06d', now + whole, frac)
end
-- tats[k]: key k's TAT as far as this batch went, kept only for a later
-- decision to find; `out` sized for the usual batch of one.
local tats, out, n, last = {}, {0, 0, 0, 0, 0}, 0, #ARGV - 3
for i = 1, last, 4 do
  local k = tonumber(ARGV[i])
  local interval = tonumber(ARGV[i + 1])
  local limit = ARGV[i + 2] * interval
  local tat = tats[k] or ahead(redis.call('GET', KEYS[k]))
  local new_tat = tat + ARGV[i + 3] * interval
  if new_tat > limit * (1 + 1e-12) then
    out[n + 1], out[n + 3] = 0, math.ceil(new_tat - limit)
  else
    tat = new_tat
    -- The expiry as a string, cheaper for the server (sem_common.lua).
    redis.call('SET', KEYS[k], store(tat), 'PX', string.format('%d', math.max(1, math.ceil(tat / 1000))))
    out[n + 1], out[n + 3] = 1, 0
  end
  out[n + 2] = math.max(0, math.floor((limit - tat) / interval + 1e-9))
  out[n + 4] = math.ceil(tat)
  n = n + 4
  if i < last then
    tats[k] = tat
  end
end
out[n + 1] = now
return out
