-- Shared head of every latch script, made once when the library loads (a
-- group: scripts.rs); its helpers read the calling function's KEYS, always
-- in this order:
--   1 count    what is left to count down; absent once it reached zero
--              (or never set): the latch is open
--   2 waiters  hash token -> "<channel>|<deadline ms>", or "o" once the
--              latch opened and told it (for its re-check to find, should
--              the message be lost and the latch set again: latch_wait.lua)
--   3 counted  set of the count-downs' tokens already counted, where a
--              client may send one twice (a cluster's: latch.rs)
-- The count lives at most the latch's lease, the counted as long as the
-- count, the waiters until a second past the last deadline, or a second
-- past the opening: a latch nobody finishes keeps nothing for good.
-- Cost: O(1), and O(w) for the w waiters told when it opens.

-- Tells every waiter the latch opened ("<token>:0"), and leaves it marked
-- so for a second (its re-check comes within RECHECK).
local function open()
  local waiters = redis.call('HGETALL', KEYS[2])
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  local told = {}
  for i = 1, #waiters, 2 do
    local channel = string.match(waiters[i + 1], '^(.*)|%d+$')
    if channel then
      redis.call('PUBLISH', channel, waiters[i] .. ':0')
      told[#told + 1] = waiters[i]
      told[#told + 1] = 'o'
    end
  end
  if #told > 0 then
    redis.call('HSET', KEYS[2], unpack(told))
    redis.call('PEXPIRE', KEYS[2], 1000)
  end
end
