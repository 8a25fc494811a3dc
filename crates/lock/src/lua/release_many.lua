-- The lock releases a client asked at once, on one server (batch.rs), in
-- order, at one reading of the clock.
-- KEYS: per release its lock's 4 keys (common.lua).
-- ARGV: per release its token (release.lua's argument).
-- Returns per release 1 when released, 0 when the token did not hold it.
-- Cost: give's per release (common.lua); the clock and the call itself
-- once for the batch.
local out, us = {}, now_us()
for i = 1, #ARGV do
  local k = (i - 1) * 4
  use_keys({KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]})
  out[i] = give(ARGV[i], us)
end
return out
