-- Shared head of every lock script, made once when the library loads (a
-- group: scripts.rs); its helpers read the calling function's KEYS,
-- always in this order:
--   1 lock     "<token>:<fence>" with a PX lease while held
--   2 fence    a fence the clock has not passed yet, kept only until it
--              does (below)
--   3 queue    list of waiters, oldest first, "<token>|<record>"
--   4 waiters  hash token -> record "<lease ms>|<deadline ms>|<channel>":
--              who waits (a hand-off's HDEL answers whether the waiter it
--              popped still does)
-- Times come from the server's clock (now_ms, now_us: the library header,
-- crates/redis/src/lua/header.lua).
-- A fence is the server's clock in µs, or one more than the last fence
-- given if that is larger: above every earlier grant's. While the lock is
-- held its fence is in the lock's value; the fence key holds one only
-- while the clock is behind it (two grants within a µs, a floor raised
-- ahead of the clock, a clock set back while the lock was held), until the
-- clock passes it. So a grant reads the fence key only where it exists and
-- writes it almost never: a write costs the server about 2 µs more than a
-- read (SET … GET PX against a name more in the EXISTS, in one function
-- call: the server's CPU under redis-benchmark).
-- No key outlives the lock to keep its fence, unless the server's clock is
-- set back by more than the lock was idle.
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

-- The ms until the clock (`us`) passes `fence`, and one more.
local function ms_ahead(fence, us)
  return math.ceil((fence - us) / 1000) + 1
end

-- Keeps `fence` in the fence key until the clock (`us`) passes it, unless
-- the clock has passed it already or the key holds a larger one.
local function keep_fence(fence, us)
  if fence < us then
    return
  end
  local kept = tonumber(redis.call('GET', KEYS[2]) or '0')
  if kept < fence then
    local keep = math.max(ms_ahead(fence, us), redis.call('PTTL', KEYS[2]), 1)
    redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', keep)
  end
end

-- Grants the free lock to `token`. `us`: the server's clock in µs, read by
-- the caller (or nil to read it); `last`: the fence of the grant it
-- replaces, if known; `fenced`: false when the caller knows the fence key
-- is absent (else it is read). A fence ahead of the clock is kept in the
-- fence key until the clock passes it, for the grant after this one if
-- this lock ends unreleased.
-- Cost: SET, with GET unless `fenced` is false, TIME unless `us` is
-- given; SET … PX more when the fence is ahead of the clock.
local function grant(token, lease, us, last, fenced)
  us = us or now_us()
  local fence = us
  if fenced ~= false then
    local kept = redis.call('GET', KEYS[2])
    if kept and tonumber(kept) >= fence then
      fence = tonumber(kept) + 1
    end
  end
  if last and last >= fence then
    fence = last + 1
  end
  if fence > us then
    local keep = math.max(tonumber(lease), ms_ahead(fence, us))
    redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', keep)
  end
  redis.call('SET', KEYS[1], string.format('%s:%d', token, fence), 'PX', lease)
  return fence
end

-- Gives the free lock to the oldest waiter whose deadline has not passed and
-- tells it on its channel. Entries of waiters that left or timed out are
-- dropped on the way: the HDEL that takes a waiter out answers whether it
-- was still there. Returns true when someone got the lock. `us`, `last`:
-- as for grant.
-- Cost of a hand-off: LPOP, HDEL, TIME, the grant's GET and SET, PUBLISH.
local function handoff(us, last)
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
        local fence = grant(token, lease, us, last)
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
-- Cost: free, 3 calls (EXISTS, TIME, SET; +GET when a fence is kept);
-- held, queueing, 7 (EXISTS, GET, TIME, HSETNX, RPUSH, PTTL, PTTL; +2
-- PEXPIRE when it extends the queue: keep_queue); TIME not where `us` is
-- given.
local function take(token, lease, wait, channel, us)
  -- Which of the lock, the queue and a kept fence exist, in one call:
  -- EXISTS counts a key named n times n times, so the answer is the bits
  -- 4 held, 2 someone queued, 1 a fence kept.
  local present = redis.call('EXISTS', KEYS[1], KEYS[1], KEYS[1], KEYS[1], KEYS[3], KEYS[3], KEYS[2])
  -- A free lock with waiters means its holder expired: they go first.
  if present < 2 or (present < 4 and not handoff(us)) then
    return 1, grant(token, lease, us, nil, present % 2 == 1)
  end
  local fence = owned(token)
  if fence then
    return 1, fence
  end
  -- Queued once: a resend finds its record.
  if wait > 0 then
    local ms = us and math.floor(us / 1000) or now_ms()
    local record = string.format('%s|%d|%s', lease, ms + wait, channel)
    enqueue(KEYS[3], KEYS[4], token, record, wait)
  end
  return 0, redis.call('PTTL', KEYS[1])
end

-- After the lock held at `fence` was deleted: hands it on, or, when nobody
-- takes it and the clock (`us`, or nil to read it) has not passed its
-- fence, keeps the fence for the next grant.
local function hand_on(fence, us)
  us = us or now_us()
  if not handoff(us, fence) then
    keep_fence(fence, us)
  end
end

-- Deletes the lock only if `token` holds it, then hands it on (release.lua,
-- and each release of a batch: release_many.lua, `us` the batch's one
-- reading of the clock, else nil). Answers 1 when released, 0 when the
-- token did not hold it.
-- Cost: 4 calls (GET, DEL, TIME, LPOP) with nobody waiting; 9 handing on
-- (+HDEL, GET, SET, PUBLISH: handoff); TIME not where `us` is given.
local function give(token, us)
  local fence = owned(token)
  if not fence then
    return 0
  end
  redis.call('DEL', KEYS[1])
  hand_on(fence, us)
  return 1
end
