-- The read-write lock acquires a client asked at once, on one server
-- (batch.rs), in order, at one reading of the clock.
-- KEYS: per acquire its lock's 6 keys (rw_common.lua).
-- ARGV: per acquire rw_acquire.lua's 5 arguments.
-- Returns per acquire take's 3 integers.
-- Cost: take's per acquire (rw_common.lua); the clock and the call itself
-- once for the batch.
local out, n = {}, 0
local ms, us = now()
for i = 1, #ARGV, 5 do
  local k = (i - 1) / 5 * 6
  use_keys({KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6]})
  out[n + 1], out[n + 2], out[n + 3] =
    take(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), ARGV[i + 4], ms, us)
  n = n + 3
end
return out
