-- Library-level helpers of the lock's queues (the mutex's, the
-- semaphore's, the read-write lock's), made once when the library loads.

-- Keeps a queue and its waiters' records until `wait` ms from now at
-- least. They are given up to a second more (or the wait, if shorter), so
-- that the waiters queueing after this one on a busy lock, each a little
-- later, need not extend them too: one PTTL instead of PTTL and two
-- PEXPIREs. So they outlive the last deadline by that much at most.
local function keep_queue(queue, records, wait)
  if redis.call('PTTL', queue) < wait then
    local keep = wait + math.min(wait, 1000)
    redis.call('PEXPIRE', queue, keep)
    redis.call('PEXPIRE', records, keep)
  end
end

-- Queues `token` with its `record` once (a resend finds the record and
-- queues nothing) and keeps both for `wait` ms at least: HSETNX, then
-- RPUSH and keep_queue's calls when it was not queued yet.
local function enqueue(queue, records, token, record, wait)
  if redis.call('HSETNX', records, token, record) == 1 then
    redis.call('RPUSH', queue, token .. '|' .. record)
    keep_queue(queue, records, wait)
  end
end
