-- ARGV: token, permits wanted, lease ms, wait ms (0 = do not queue),
-- notification channel, the caller's number of permits.
-- Returns {1, 0, ms left of the lease} when granted, {-2, permits, 0} when
-- it wants more than the number set live (set_permits), else {0, ms
-- until the first lease ends or -1, 0}: take's three values (sem_common.lua).
-- Cost: take's.
local state, a, b = take(ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], now_ms())
return {state, a, b}
