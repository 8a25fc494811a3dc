-- ARGV: sale id, order id, 'pay' | 'cancel'.
-- Returns the order's state afterwards, 'not_found', or 'refused|<state>'.
-- Paying a paid order and cancelling a cancelled one change nothing. An
-- order past its pay-by time expires here and now, whatever the sweeper did.
local sale, id, op = ARGV[1], ARGV[2], ARGV[3]
local value = redis.call('HGET', KEYS[4], id)
if not value then
  return 'not_found'
end
local state, user, qty, pay_by = parse(value)
if state == 'pending_payment' and tonumber(pay_by) <= now_ms() then
  settle(sale, id, user, qty, pay_by, 'expired')
  state = 'expired'
end
local target = op == 'pay' and 'paid' or 'cancelled'
if state == target then
  return state
end
if state ~= 'pending_payment' then
  return 'refused|' .. state
end
settle(sale, id, user, qty, pay_by, target)
return target
