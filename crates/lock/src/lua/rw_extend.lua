-- ARGV: "<token>:<fence>", r or w, lease ms. Renews a grant whose lease has
-- not ended: 1, else 0.
local id, kind, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ms = now()
if kind == 'w' then
  if redis.call('GET', KEYS[2]) ~= id then
    return 0
  end
  redis.call('PEXPIRE', KEYS[2], lease)
else
  local score = redis.call('ZSCORE', KEYS[1], id)
  if not score or tonumber(score) <= ms then
    return 0
  end
  redis.call('ZADD', KEYS[1], 'XX', ms + lease, id)
end
tidy(ms)
return 1
