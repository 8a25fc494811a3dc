-- Shared head of every latch script, made once when the library loads (a
-- group: scripts.rs); its helpers read the calling function's KEYS, always
-- in this order:
--   1 count    what is left to count down; absent once it reached zero
--              (or never set): the latch is open
--   2 waiters  hash token -> "<channel>|<deadline ms>"
--   3 counted  set of the count-downs' tokens already counted, where a
--              client may send one twice (a cluster's: latch.rs)
-- The count lives at most the latch's lease, the counted as long as the
-- count, the waiters until the last deadline: a latch nobody finishes
-- keeps nothing for good.
-- Cost: O(1), and O(w) for the w waiters told when it opens.

-- Tells every waiter the latch opened ("<token>:0") and forgets them.
local function open()
  local waiters = redis.call('HGETALL', KEYS[2])
  for i = 1, #waiters, 2 do
    local channel = string.match(waiters[i + 1], '^(.*)|%d+$')
    redis.call('PUBLISH', channel, waiters[i] .. ':0')
  end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
end
