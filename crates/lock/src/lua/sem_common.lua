-- Shared head of every semaphore script, made once when the library loads
-- (a group: scripts.rs); its helpers read the calling function's KEYS,
-- always in this order:
--   1 holders  sorted set "<token>:<i>" -> lease end (ms, server clock):
--              one member per permit held
--   2 queue    list of waiters, oldest first, "<token>|<record>"
--   3 waiters  hash token -> record
--              "<lease ms>|<deadline ms>|<permits>|<channel>": who waits
--              (a hand-off's HDEL answers whether the waiter it popped
--              still does)
--   4 limit    the number of permits set live (set_permits), if any
-- Each key lives only as long as what it holds: the holders until the last
-- lease ends, the queue and waiters until the last deadline (and up to the
-- last wait or a second more, whichever is less: keep_queue), the limit
-- while either lives (and at least as long as it was set for); an idle
-- semaphore keeps nothing.
-- Cost: O(log n) per permit granted or returned, n the permits held;
-- O(w) for the w waiters a hand-off looks at. Each `redis.call` costs
-- about a microsecond beyond its command, so the common paths make few:
-- 6 for a grant with nobody waiting, 4 for a release with nobody waiting,
-- 10 for a release handing its permit on.

-- The number of permits: the live one if set, else the caller's; and
-- whether a live one is set.
local function limit(default)
  local set = redis.call('GET', KEYS[4])
  return tonumber(set or default), set ~= false
end

-- On the paths every grant and release takes, numbers go to redis.call
-- as strings, written by string.format('%d'): the server turns a Lua
-- number argument into text with "%.17g", ~1,500 instructions more for
-- each (callgrind); and a lease that came as a string is passed on as one.

-- Permits whose lease ended return: their holder is gone or late.
local function prune(now)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
end

-- Grants `n` permits to `token` among `held` others, in one ZADD, and
-- keeps the holders at least until this lease ends (`lease`: ms, a
-- number or the string it came as).
local function grant(token, n, lease, now, held)
  local ends = string.format('%d', now + lease)
  -- One permit, the usual ask: no table, and no number joined to the
  -- token (Lua writes it with "%.14g", ~2,000 instructions).
  if n == 1 then
    redis.call('ZADD', KEYS[1], ends, token .. ':1')
  else
    local members = {}
    for i = 1, n do
      members[#members + 1] = ends
      members[#members + 1] = token .. ':' .. i
    end
    redis.call('ZADD', KEYS[1], unpack(members))
  end
  if held == 0 then
    redis.call('PEXPIRE', KEYS[1], lease)
  else
    redis.call('PEXPIRE', KEYS[1], lease, 'GT')
  end
end

-- Keeps a live limit at least as long as the holders and the queue.
local function keep_limit()
  local keep = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]))
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[4], keep, 'GT')
  end
end

-- Grants permits to waiters in arrival order while the oldest fits, and
-- tells each on its channel ("<token>:<permits>"); drops waiters whose
-- deadline passed and entries of waiters that left. Strict order: a waiter
-- that does not fit is put back first and blocks the ones behind it, so a
-- large request is not starved by small ones; one wanting more than a
-- number set live is dropped.
-- `lim`: the number of permits, or nil to read it (see limit) with
-- `default` only once someone waits; `fixed`: `lim` is set live. Answers
-- whether nobody waits.
-- Costs one call with nobody waiting; a permit handed on costs LPOP,
-- ZCARD, HDEL (which answers whether the waiter is still there), the
-- grant and PUBLISH (+PTTL twice and PEXPIRE to keep a live limit). With
-- every permit held nobody fits: the oldest waiter is put back (LPUSH)
-- after one look (+PTTL and PEXPIRE when it was the only one).
local function handoff(now, lim, default, fixed)
  local entry = redis.call('LPOP', KEYS[2])
  if not entry then
    return true
  end
  -- Read here, a live limit must outlive the grants made here (the callers
  -- that pass `lim` keep it themselves): else it could end while they hold,
  -- and a caller's own number of permits be granted beside them.
  local live, granted = false, false
  if not lim then
    lim, live = limit(default)
  end
  -- A caller's own number is not the semaphore's: another client's may
  -- be larger. Only a number set live drops a waiter that wants more.
  fixed = fixed or live
  local function done(nobody_waits)
    if live and granted then
      keep_limit()
    end
    return nobody_waits
  end
  local held = redis.call('ZCARD', KEYS[1])
  while true do
    -- The numbers first: a pattern that backtracks over the channel costs
    -- twice as much.
    local token, lease, deadline, wants, channel = string.match(entry, '^([^|]*)|(%d+)|(%d+)|(%d+)|(.*)$')
    if not token then
      -- A bare token, queued by an earlier release of this library (two
      -- can share a server: library.rs), whose queue held only tokens: its
      -- record, in the waiters, was "<channel>|<lease>|<deadline>|<permits>".
      token = entry
      channel, lease, deadline, wants = string.match(redis.call('HGET', KEYS[3], token) or '', '^(.*)|(%d+)|(%d+)|(%d+)$')
    end
    -- No record (need nil): the waiter left.
    local need = tonumber(wants)
    if not need or tonumber(deadline) <= now then
      redis.call('HDEL', KEYS[3], token)
    elseif fixed and need > lim then
      -- More than the semaphore has now (a live number lowered since it
      -- queued): it would never fit and block everyone behind it. Dropped,
      -- its next re-check asks again and is refused (sem_acquire.lua).
      redis.call('HDEL', KEYS[3], token)
    elseif held + need > lim then
      if redis.call('HEXISTS', KEYS[3], token) == 1 then
        -- Its LPOP took the queue's last entry, so the key and its expiry
        -- went: back, it must live as long as the waiter does (else a later
        -- waiter's keep_queue, seeing no expiry, would cut it short).
        if redis.call('LPUSH', KEYS[2], entry) == 1 then
          redis.call('PEXPIRE', KEYS[2], math.max(redis.call('PTTL', KEYS[3]), tonumber(deadline) - now))
        end
        return done(false)
      end
    elseif redis.call('HDEL', KEYS[3], token) == 1 then
      grant(token, need, lease, now, held)
      granted = true
      held = held + need
      redis.call('PUBLISH', channel, token .. ':' .. wants)
      if held >= lim then
        return done(false)
      end
    end
    entry = redis.call('LPOP', KEYS[2])
    if not entry then
      return done(true)
    end
  end
end

-- Milliseconds until the first lease ends (a permit may return then), or -1.
local function next_end(now)
  local first = redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')
  if first[2] then
    return math.max(0, tonumber(first[2]) - now)
  end
  return -1
end

-- Takes `n` permits for `token` (sem_acquire.lua, and each acquire of a
-- batch: sem_acquire_many.lua, which reads the clock, `now`, once).
-- `lease` is the ms string it came as; `wait` ms, 0 = do not queue;
-- `default` the caller's number of permits. Answers 1, 0 and the ms left
-- of the lease when granted; -2 and the number set live when it wants
-- more than that (set_permits); else 0, the ms until the first lease ends
-- (or -1) and 0. Asked twice (a cluster client resends after a dropped
-- connection), it answers the grant it already made: granted again at
-- once, the same members' leases are renewed and nothing is counted twice;
-- else its grant is found before it would queue or be refused.
local function take(token, n, lease, wait, channel, default, now)
  prune(now)
  -- Whether anyone waits and whether a live limit is set, in one call
  -- (EXISTS counts a key named twice twice): 2 or 3, a queue; odd, a limit.
  -- Each is then read only if it is there.
  local present = redis.call('EXISTS', KEYS[2], KEYS[2], KEYS[4])
  local lim, live = tonumber(default), present % 2 == 1
  if live then
    lim = limit(default)
  end
  -- With someone waiting and every permit held, nobody fits: the hand-off
  -- would only look (as it does, first the queue, then the count).
  if present < 2 or (redis.call('ZCARD', KEYS[1]) < lim and handoff(now, lim, nil, live)) then
    local held = redis.call('ZCARD', KEYS[1])
    if held + n <= lim then
      grant(token, n, lease, now, held)
      if live then
        keep_limit()
      end
      return 1, 0, tonumber(lease)
    end
  end
  local granted = redis.call('ZSCORE', KEYS[1], token .. ':1')
  if granted then
    return 1, 0, tonumber(granted) - now
  end
  -- More than a number set live: it would never fit (after a resend's grant
  -- is found, which it may be).
  if live and n > lim then
    return -2, lim, 0
  end
  -- Queued once: a resend finds its entry.
  if wait > 0 then
    local record = string.format('%s|%d|%d|%s', lease, now + wait, n, channel)
    enqueue(KEYS[2], KEYS[3], token, record, wait)
  end
  if live then
    keep_limit()
  end
  return 0, next_end(now), 0
end

-- Returns `permit` ("<token>:<i>") and hands on (sem_release.lua, and each
-- release of a batch: sem_release_many.lua, `now` read once); `default`
-- the caller's number of permits. Answers 1 when it was held, 0 when its
-- lease had ended (the leases that ended go first, so it is no longer
-- there to remove). The holders' expiry is left as it is: it ends with
-- the longest lease granted, a moment later than needed at most.
local function give(permit, default, now)
  prune(now)
  local returned = redis.call('ZREM', KEYS[1], permit)
  handoff(now, nil, default)
  return returned
end
