-- The permits a client returned at once, on one server (batch.rs), in
-- order, at one reading of the clock.
-- KEYS: per release its semaphore's 4 keys (sem_common.lua).
-- ARGV: per release sem_release.lua's 2 arguments.
-- Returns per release 1 when the permit was held, 0 when its lease had ended.
-- Cost: give's per release (sem_common.lua); the clock and the call itself
-- once for the batch.
local out, now = {}, now_ms()
for i = 1, #ARGV, 2 do
  local k = (i - 1) * 2
  use_keys({KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]})
  out[(i + 1) / 2] = give(ARGV[i], ARGV[i + 1], now)
end
return out
