-- ARGV: token, r or w. A waiter asks after a notification it may have
-- missed: returns {1, fence, ms left} when it holds the lock, {0, ms until
-- a holder's lease ends or -1} while it waits, {-1, 0} when it is neither
-- queued nor holding (its deadline passed).
local token, kind = ARGV[1], ARGV[2]
local ms, us = now()
prune(ms)
handoff(ms, us)
tidy(ms)
local fence, left = held(token, kind, ms)
if fence then
  return {1, fence, left}
end
if redis.call('HEXISTS', KEYS[5], token) == 1 then
  return {0, next_end(ms)}
end
return {-1, 0}
