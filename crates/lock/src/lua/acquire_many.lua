-- The lock acquires a client asked at once, on one server (batch.rs), in
-- order, at one reading of the clock.
-- KEYS: per acquire its lock's 4 keys (common.lua).
-- ARGV: per acquire acquire.lua's 4 arguments.
-- Returns per acquire acquire.lua's 2 integers.
-- Cost: take's per acquire (common.lua); the clock and the call itself
-- once for the batch.
local out, n, us = {}, 0, now_us()
for i = 1, #ARGV, 4 do
  use_keys({KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3]})
  out[n + 1], out[n + 2] = take(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], us)
  n = n + 2
end
return out
