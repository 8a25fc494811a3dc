-- ARGV: sale id, most orders to expire. Expires unpaid orders past their
-- pay-by time, oldest first; returns how many. Each is expired once: the
-- order leaves `pending` in the same script that returns its units.
local sale = ARGV[1]
local due = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[2]))
local expired = 0
for _, id in ipairs(due) do
  local value = redis.call('HGET', KEYS[4], id)
  local state, user, qty, pay_by = nil, nil, nil, nil
  if value then
    state, user, qty, pay_by = parse(value)
  end
  if state == 'pending_payment' then
    settle(sale, id, user, qty, pay_by, 'expired')
    expired = expired + 1
  else
    redis.call('ZREM', KEYS[5], id)
  end
end
return expired
