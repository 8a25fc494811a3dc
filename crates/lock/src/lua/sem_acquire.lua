-- ARGV: token, permits wanted, lease ms, wait ms (0 = do not queue),
-- notification channel, the caller's number of permits.
-- Returns {1, 0, ms left of the lease} when granted, {-2, permits} when
-- it wants more than the number set live (set_permits), else {0, ms
-- until the first lease ends or -1}. Sent twice (a cluster client resends
-- after a dropped connection), it answers the grant it already made:
-- granted again at once, the same members' leases are renewed and nothing
-- is counted twice; else its grant is found before it would queue or be
-- refused.
local token, n, lease, wait = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
prune(now)
-- Whether anyone waits and whether a live limit is set, in one call
-- (EXISTS counts a key named twice twice): 2 or 3, a queue; odd, a limit.
-- Each is then read only if it is there.
local present = redis.call('EXISTS', KEYS[2], KEYS[2], KEYS[4])
local lim, live = tonumber(ARGV[6]), present % 2 == 1
if live then
  lim = limit(ARGV[6])
end
-- With someone waiting and every permit held, nobody fits: the hand-off
-- would only look (as it does, first the queue, then the count).
if present < 2 or (redis.call('ZCARD', KEYS[1]) < lim and handoff(now, lim, nil, live)) then
  local held = redis.call('ZCARD', KEYS[1])
  if held + n <= lim then
    grant(token, n, ARGV[3], now, held)
    if live then
      keep_limit()
    end
    return {1, 0, lease}
  end
end
local granted = redis.call('ZSCORE', KEYS[1], token .. ':1')
if granted then
  return {1, 0, tonumber(granted) - now}
end
-- More than a number set live: it would never fit (after a resend's grant
-- is found, which it may be).
if live and n > lim then
  return {-2, lim}
end
-- Queued once: a resend finds its entry.
if wait > 0 then
  local record = string.format('%d|%d|%d|%s', lease, now + wait, n, ARGV[5])
  if redis.call('HSETNX', KEYS[3], token, record) == 1 then
    redis.call('RPUSH', KEYS[2], token .. '|' .. record)
    keep_queue(KEYS[2], KEYS[3], wait)
  end
end
if live then
  keep_limit()
end
return {0, next_end(now)}
