-- Shared head of every read-write lock script, made once when the library
-- loads (a group: scripts.rs); its helpers read the calling function's
-- KEYS, always in this order:
--   1 readers  sorted set "<token>:<fence>" -> lease end (ms, server clock)
--   2 writer   "<token>:<fence>" with a PX lease while a writer holds it
--   3 fence    the last fence given; it lives only while the lock is in use
--   4 queue    list of waiters, oldest first, "<token>|<record>"
--   5 waiters  hash token -> record
--              "<lease ms>|<deadline ms>|<r or w>|<channel>": who still
--              waits (the queue and the records outlive the last deadline
--              by a bounded margin: keep_queue, queue.lua)
--   6 granted  hash token -> fence of each reader a hand-off granted, so
--              that a re-check finds the grant without a scan; a record
--              goes with its grant (release, withdraw, prune), and the
--              hash expires with the readers (tidy)
-- Fences come from the server's clock in µs, or the last fence + 1 if
-- that is larger: every grant's fence is above every earlier one's, and
-- no key has to outlive the lock to keep it so (unless the server's clock
-- is set back by more than the lock was idle).
-- Writers go first: a reader enters only when no writer holds the lock
-- and nobody waits, so a waiting writer stops new readers.
-- Cost: O(log r) for r readers, and O(1) for a waiter to find the grant a
-- hand-off made it; but O(r) past 128 readers (a scan: held) for a token
-- with no record, which nothing tells from one granted unrecorded: every
-- acquire's first look (a resend's may find a grant made at once), and a
-- waiter's re-check after an earlier release of this library's hand-off
-- granted it. O(w) for the w waiters a hand-off serves, O(e) for the e
-- leases that ended since the last call.

-- On the common paths numbers go to redis.call as strings (why:
-- sem_common.lua).

-- One call where the clock is ahead of the last fence (SET … GET), as it
-- nearly always is; tidy sets the key's expiry after.
local function next_fence(us)
  local last = redis.call('SET', KEYS[3], string.format('%d', us), 'GET')
  if last and tonumber(last) >= us then
    us = tonumber(last) + 1
    redis.call('SET', KEYS[3], string.format('%d', us))
  end
  return us
end

-- Readers whose lease ended go, and a hand-off's record of each with
-- them: only one of a reader gone without its release is left to remove.
local function prune(ms)
  local bound = string.format('%d', ms)
  local ended = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', bound)
  if not ended[1] then
    return
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', bound)
  local tokens = {}
  for i, id in ipairs(ended) do
    tokens[#tokens + 1] = string.match(id, '^(.*):%d+$')
    -- Inside Lua's unpack limit.
    if #tokens == 1000 or (i == #ended and tokens[1]) then
      redis.call('HDEL', KEYS[6], unpack(tokens))
      tokens = {}
    end
  end
end

local function grant(token, kind, lease, ms, us)
  local fence = next_fence(us)
  local id = string.format('%s:%d', token, fence)
  if kind == 'w' then
    redis.call('SET', KEYS[2], id, 'PX', lease)
  else
    redis.call('ZADD', KEYS[1], string.format('%d', ms + lease), id)
  end
  return fence
end

-- The fence of `token`'s grant of `kind`, or nil.
local function held(token, kind, ms)
  if kind == 'w' then
    local v = redis.call('GET', KEYS[2])
    if v and string.sub(v, 1, #token + 1) == token .. ':' then
      return tonumber(string.sub(v, #token + 2)), redis.call('PTTL', KEYS[2])
    end
    return nil
  end
  -- A reader granted by a hand-off has a record of its fence (one whose
  -- grant an earlier release's release ended is dropped); one still
  -- waiting is not granted.
  local fence = redis.call('HGET', KEYS[6], token)
  if fence then
    local score = redis.call('ZSCORE', KEYS[1], token .. ':' .. fence)
    if score and tonumber(score) > ms then
      return tonumber(fence), tonumber(score) - ms
    end
    redis.call('HDEL', KEYS[6], token)
    return nil
  end
  if redis.call('HEXISTS', KEYS[5], token) == 1 then
    return nil
  end
  -- One page holds every reader while they are few (a listpack); past
  -- 128, the scan goes on to its end or the token's grant.
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', KEYS[1], cursor, 'MATCH', token .. ':*', 'COUNT', 1000)
    local found = page[2]
    if found[1] then
      if tonumber(found[2]) > ms then
        return tonumber(string.sub(found[1], #token + 2)), tonumber(found[2]) - ms
      end
      return nil
    end
    cursor = page[1]
  until cursor == '0'
  return nil
end

-- Sets the readers' expiry, and their records', to the last lease's end
-- and the fence's to the longest of readers, writer and queue.
local function tidy(ms)
  local keep = 0
  local last = redis.call('ZRANGE', KEYS[1], '-1', '-1', 'WITHSCORES')
  if last[2] then
    keep = math.max(1, tonumber(last[2]) - ms)
    local ttl = string.format('%d', keep)
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[6], ttl)
  end
  keep = math.max(keep, redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[4]))
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[3], string.format('%d', keep))
  else
    redis.call('DEL', KEYS[3])
  end
end

-- Serves the queue in order: a writer when nobody holds the lock, then
-- stop; readers, as many in a row as wait, while no writer holds it.
-- Each served waiter costs LINDEX, LPOP, HDEL (which answers whether it
-- still waits), the grant and PUBLISH, and a reader the HSET of its
-- grant's record (whose expiry the caller's tidy sets).
local function handoff(ms, us)
  while true do
    local head = redis.call('LINDEX', KEYS[4], 0)
    if not head then
      return
    end
    -- The numbers first: a pattern that backtracks over the channel costs
    -- twice as much.
    local token, lease, deadline, kind, channel = string.match(head, '^([^|]*)|(%d+)|(%d+)|([rw])|(.*)$')
    if not token then
      -- A bare token, queued by an earlier release of this library (two
      -- can share a server: library.rs), whose queue held only tokens: its
      -- record, in the waiters, was "<channel>|<lease>|<deadline>|<r or w>".
      token = head
      channel, lease, deadline, kind = string.match(redis.call('HGET', KEYS[5], token) or '', '^(.*)|(%d+)|(%d+)|([rw])$')
    end
    -- No record (kind nil): the waiter left.
    if not kind or tonumber(deadline) <= ms then
      redis.call('LPOP', KEYS[4])
      redis.call('HDEL', KEYS[5], token)
    elseif redis.call('EXISTS', KEYS[2]) == 1
      or (kind == 'w' and redis.call('ZCARD', KEYS[1]) > 0) then
      return
    else
      redis.call('LPOP', KEYS[4])
      if redis.call('HDEL', KEYS[5], token) == 1 then
        local fence = grant(token, kind, tonumber(lease), ms, us)
        redis.call('PUBLISH', channel, string.format('%s:%d', token, fence))
        if kind == 'w' then
          return
        end
        redis.call('HSET', KEYS[6], token, string.format('%d', fence))
      end
    end
  end
end

-- Milliseconds until a holder's lease ends (the writer's, or the first
-- reader's), or -1 when nobody holds it.
local function next_end(ms)
  local writer = redis.call('PTTL', KEYS[2])
  if writer > 0 then
    return writer
  end
  local first = redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')
  if first[2] then
    return math.max(0, tonumber(first[2]) - ms)
  end
  return -1
end

-- Takes the lock for `token` (rw_acquire.lua, and each acquire of a
-- batch: rw_acquire_many.lua, which reads the clock, `ms` and `us`,
-- once): `kind` r or w, `lease` and `wait` in ms (0 = do not queue),
-- `channel` the one the hand-off tells it on. Answers 1, the fence and the
-- ms left of the lease when granted, else 0, the ms until a holder's lease
-- ends (or -1) and 0. Asked twice (a cluster client resends after a
-- dropped connection), it answers the grant it made.
local function take(token, kind, lease, wait, channel, ms, us)
  prune(ms)
  -- Handed on before the look: a resend whose first run queued it may be
  -- the waiter this hand-off serves, and must find that grant, not take a
  -- second one below.
  handoff(ms, us)
  local fence, left = held(token, kind, ms)
  if fence then
    tidy(ms)
    return 1, fence, left
  end
  -- Nobody waits (an empty list is no key) and no writer holds it.
  local free = redis.call('EXISTS', KEYS[4], KEYS[2]) == 0
  if free and (kind == 'r' or redis.call('ZCARD', KEYS[1]) == 0) then
    fence = grant(token, kind, lease, ms, us)
    tidy(ms)
    return 1, fence, lease
  end
  -- Queued once: a resend finds its record.
  if wait > 0 then
    local record = string.format('%d|%d|%s|%s', lease, ms + wait, kind, channel)
    enqueue(KEYS[4], KEYS[5], token, record, wait)
  end
  tidy(ms)
  return 0, next_end(ms), 0
end
