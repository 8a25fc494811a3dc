-- ARGV: token, lease ms, wait ms (0 = do not queue), notification channel.
-- Returns {1, fence} when granted, else {0, pttl of the current holder}.
-- Cost: take's (common.lua).
local granted, value = take(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4])
return {granted, value}
