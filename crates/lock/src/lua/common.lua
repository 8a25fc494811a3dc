-- Shared head of every lock script, made once when the library loads (a
-- group: scripts.rs); its helpers read the calling function's KEYS,
-- always in this order:
--   1 lock     "<token>:<fence>" with a PX lease while held
--   2 fence    the last fence given, kept only while it matters (below)
--   3 queue    list of waiting tokens, oldest first
--   4 waiters  hash token -> "<channel>|<lease ms>|<deadline ms>"
-- Times come from the server's clock (TIME) so client clocks never matter.
-- A fence is the server's clock in µs, or the last fence + 1 if that is
-- larger: above every earlier grant's. No key outlives the lock to keep it
-- so, except a fence ahead of the clock, kept until the clock passes it
-- (unless the server's clock is set back by more than the lock was idle).
-- The queue and the waiters expire with their last deadline.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The fence of the grant held by `token`, or nil.
local function owned(token)
  local v = redis.call('GET', KEYS[1])
  local n = #token
  if v and string.sub(v, 1, n + 1) == token .. ':' then
    return tonumber(string.sub(v, n + 2))
  end
  return nil
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The clock's fence is written at once and the last one read in the same
-- call (SET … GET): one call where the clock is ahead, as it nearly always
-- is. Where it is not (two grants within a µs, or a floor raised ahead of
-- the clock), the fence is the last + 1 and its key is kept until the
-- clock passes it, as raise_fence keeps a floor.
local function grant(token, lease)
  local us = now_us()
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
-- tells it on its channel. Waiters that gave up or timed out are dropped on
-- the way. Returns true when someone got the lock.
local function handoff()
  local now = nil
  while true do
    local token = redis.call('LPOP', KEYS[3])
    if not token then
      return false
    end
    local entry = redis.call('HGET', KEYS[4], token)
    if entry then
      redis.call('HDEL', KEYS[4], token)
      local channel, lease, deadline = string.match(entry, '^(.*)|(%d+)|(%d+)$')
      now = now or now_ms()
      if tonumber(deadline) > now then
        local fence = grant(token, lease)
        redis.call('PUBLISH', channel, string.format('%s:%d', token, fence))
        return true
      end
    end
  end
end
