-- Shared head of every lock script, made once when the library loads (a
-- group: scripts.rs); its helpers read the calling function's KEYS,
-- always in this order:
--   1 lock     "<token>:<fence>" with a PX lease while held
--   2 fence    the last fence given, kept only while it matters (below)
--   3 queue    list of waiters, oldest first, "<token>|<record>"
--   4 waiters  hash token -> record "<lease ms>|<deadline ms>|<channel>":
--              who waits (a hand-off's HDEL answers whether the waiter it
--              popped still does)
-- Times come from the server's clock (now_ms, now_us: the library header,
-- crates/redis/src/lua/header.lua).
-- A fence is the server's clock in µs, or the last fence + 1 if that is
-- larger: above every earlier grant's. No key outlives the lock to keep it
-- so, except a fence ahead of the clock, kept until the clock passes it
-- (unless the server's clock is set back by more than the lock was idle).
-- The queue and the waiters expire after their last deadline, by at most
-- the last wait or a second, whichever is less (keep_queue).

-- The fence of the grant held by `token`, or nil.
local function owned(token)
  local v = redis.call('GET', KEYS[1])
  local n = #token
  if v and string.sub(v, 1, n + 1) == token .. ':' then
    return tonumber(string.sub(v, n + 2))
  end
  return nil
end

-- `us`: the server's clock in µs, read by the caller (or nil to read it).
-- The clock's fence is written at once and the last one read in the same
-- call (SET … GET): one call where the clock is ahead, as it nearly always
-- is. Where it is not (two grants within a µs, or a floor raised ahead of
-- the clock), the fence is the last + 1 and its key is kept until the
-- clock passes it, as raise_fence keeps a floor.
local function grant(token, lease, us)
  us = us or now_us()
  local last = redis.call('SET', KEYS[2], string.format('%d', us), 'PX', lease, 'GET')
  local fence = us
  if last and tonumber(last) >= us then
    fence = tonumber(last) + 1
    local ahead = math.ceil((fence - us) / 1000) + 1
    redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', math.max(tonumber(lease), ahead))
  end
  redis.call('SET', KEYS[1], string.format('%s:%d', token, fence), 'PX', lease)
  return fence
end

-- Gives the free lock to the oldest waiter whose deadline has not passed and
-- tells it on its channel. Entries of waiters that left or timed out are
-- dropped on the way: the HDEL that takes a waiter out answers whether it
-- was still there. Returns true when someone got the lock. `us`: as for
-- grant.
-- Cost of a hand-off: LPOP, HDEL, TIME, the grant's SETs, PUBLISH.
local function handoff(us)
  while true do
    local entry = redis.call('LPOP', KEYS[3])
    if not entry then
      return false
    end
    -- The numbers first: a pattern that backtracks over the channel costs
    -- twice as much.
    local token, lease, deadline, channel = string.match(entry, '^([^|]*)|(%d+)|(%d+)|(.*)$')
    if not token then
      -- A bare token, queued by an earlier release of this library (two
      -- can share a server: library.rs), whose queue held only tokens: its
      -- record, in the waiters, was "<channel>|<lease ms>|<deadline ms>".
      token = entry
      channel, lease, deadline = string.match(redis.call('HGET', KEYS[4], token) or '', '^(.*)|(%d+)|(%d+)$')
    end
    if redis.call('HDEL', KEYS[4], token) == 1 and deadline then
      us = us or now_us()
      if tonumber(deadline) * 1000 > us then
        local fence = grant(token, lease, us)
        redis.call('PUBLISH', channel, string.format('%s:%d', token, fence))
        return true
      end
    end
  end
end

-- Takes the lock for `token` (acquire.lua, and each acquire of a batch:
-- acquire_many.lua, `us` the batch's one reading of the clock, else nil).
-- `lease` is the ms string it came as; `wait` ms, 0 = do not queue.
-- Answers 1 and the fence when granted, else 0 and the holder's pttl.
-- Asked twice (a cluster client resends after a dropped connection), it
-- answers the grant it already made instead of queueing the holder.
-- Cost: free, 4 calls (EXISTS, TIME, SET … GET, SET); held, queueing, 7
-- (EXISTS, GET, TIME, HSETNX, RPUSH, PTTL, PTTL; +2 PEXPIRE when it
-- extends the queue: keep_queue); TIME not where `us` is given.
local function take(token, lease, wait, channel, us)
  -- EXISTS counts a key named twice twice: 0 free, 1 free with waiters,
  -- 2 or 3 held, in one call.
  local present = redis.call('EXISTS', KEYS[1], KEYS[1], KEYS[3])
  -- A free lock with waiters means its holder expired: they go first.
  if present == 0 or (present == 1 and not handoff(us)) then
    return 1, grant(token, lease, us)
  end
  local fence = owned(token)
  if fence then
    return 1, fence
  end
  -- Queued once: a resend finds its record.
  if wait > 0 then
    local ms = us and math.floor(us / 1000) or now_ms()
    local record = string.format('%s|%d|%s', lease, ms + wait, channel)
    if redis.call('HSETNX', KEYS[4], token, record) == 1 then
      redis.call('RPUSH', KEYS[3], token .. '|' .. record)
      keep_queue(KEYS[3], KEYS[4], wait)
    end
  end
  return 0, redis.call('PTTL', KEYS[1])
end

-- Deletes the lock only if `token` holds it, then hands it on (release.lua,
-- and each release of a batch: release_many.lua). Answers 1 when released,
-- 0 when the token did not hold it.
-- Cost: 3 calls (GET, DEL, LPOP) with nobody waiting; 8 handing on (+HDEL,
-- TIME, SET … GET, SET, PUBLISH: handoff).
local function give(token)
  if not owned(token) then
    return 0
  end
  redis.call('DEL', KEYS[1])
  handoff()
  return 1
end
