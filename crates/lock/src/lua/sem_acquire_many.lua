-- The semaphore acquires a client asked at once, on one server (batch.rs),
-- in order, at one reading of the clock.
-- KEYS: per acquire its semaphore's 4 keys (sem_common.lua).
-- ARGV: per acquire sem_acquire.lua's 6 arguments.
-- Returns per acquire sem_acquire.lua's 3 integers.
-- Cost: take's per acquire (sem_common.lua); the clock and the call itself
-- once for the batch.
local out, n, now = {}, 0, now_ms()
for i = 1, #ARGV, 6 do
  local k = (i - 1) / 6 * 4
  use_keys({KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]})
  out[n + 1], out[n + 2], out[n + 3] =
    take(ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 4], ARGV[i + 5], now)
  n = n + 3
end
return out
