-- Pays or cancels one order.
-- ARGV: sale id, generation, order ref "<ms>-<n>-<i>", 'pay' | 'cancel'.
-- Returns the order's state afterwards, 'not_found', or 'refused|<state>'.
-- Paying a paid order and cancelling a cancelled one change nothing (the
-- order's state is written again, the same). An order past its pay-by time
-- expires here and now, whatever the sweeper did.
local sale, gen, ref, op = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local m = redis.call('HMGET', KEYS[1], 'gen', 'payment_timeout', 'limit', 'n', 'left')
if m[1] ~= gen then
  return 'not_found'
end
local limit = tonumber(m[3])
local state, user, qty
local value = redis.call('HGET', KEYS[3], ref)
if value then
  state, user, qty = string.match(value, '^([^|]*)|([^|]*)|([^|]*)$')
else
  user, qty = purchase_of(gen, ref)
  if not user then
    return 'not_found'
  end
  state = 'pending_payment'
  local bought_at = tonumber(string.match(ref, '^(%d+)'))
  if bought_at + tonumber(m[2]) * 1000 <= now_ms() then
    settle(sale, gen, limit, m[5], { ref, user, qty }, 'expired', m[4])
    state = 'expired'
  end
end
local target = op == 'pay' and 'paid' or 'cancelled'
if state == target then
  -- Done before, perhaps on another connection and not on any replica
  -- yet: written again, so a WAIT after this call covers it (see
  -- purchase.lua).
  redis.call('HSET', KEYS[3], ref, value)
  return state
end
if state ~= 'pending_payment' then
  return 'refused|' .. state
end
settle(sale, gen, limit, m[5], { ref, user, qty }, target, m[4])
return target
