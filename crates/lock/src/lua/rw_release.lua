-- ARGV: "<token>:<fence>", r or w. Releases that grant and hands on: 1
-- when it was held, 0 when its lease had ended.
local id, kind = ARGV[1], ARGV[2]
local ms, us = now()
local released = 0
if kind == 'w' then
  if redis.call('GET', KEYS[2]) == id then
    redis.call('DEL', KEYS[2])
    released = 1
  end
else
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score and tonumber(score) > ms then
    released = 1
  end
  redis.call('ZREM', KEYS[1], id)
  -- The record of a grant made by a hand-off (rw_common.lua).
  local token = string.match(id, '^(.*):%d+$')
  if token then
    redis.call('HDEL', KEYS[6], token)
  end
end
prune(ms)
handoff(ms, us)
tidy(ms)
return released
