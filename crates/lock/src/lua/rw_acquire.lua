-- ARGV: token, r or w, lease ms, wait ms (0 = do not queue), channel.
-- Returns take's three values (rw_common.lua): {1, fence, ms left of the
-- lease} when granted, else {0, ms until a holder's lease ends or -1, 0}.
-- Cost: take's.
local ms, us = now()
local state, a, b = take(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ms, us)
return {state, a, b}
