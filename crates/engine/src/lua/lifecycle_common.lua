-- Shared head of the order lifecycle scripts. KEYS, always in this order:
--   1 stock  2 users  3 orders (stream)  4 states  5 pending
-- An order's state value is "<state>|<user>|<qty>|<pay by ms>"; states:
-- pending_payment -> paid | cancelled | expired. Every change appends an
-- event {type, order, user, qty} to the stream so SQL follows.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function parse(value)
  return string.match(value, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
end

-- Moves a pending order to `state`; cancelled and expired orders give their
-- units back to the stock and to the buyer's allowance, and announce it.
local function settle(sale, id, user, qty, pay_by, state)
  redis.call('HSET', KEYS[4], id, state .. '|' .. user .. '|' .. qty .. '|' .. pay_by)
  redis.call('ZREM', KEYS[5], id)
  if state ~= 'paid' then
    redis.call('INCRBY', KEYS[1], qty)
    redis.call('HINCRBY', KEYS[2], user, -tonumber(qty))
    redis.call('PUBLISH', 'seckill:restock', sale)
  end
  redis.call('XADD', KEYS[3], '*', 'type', state, 'order', id, 'user', user, 'qty', qty)
end
