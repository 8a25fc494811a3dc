-- Shared head of the purchase scripts. KEYS, always in this order:
--   1 meta      hash: start, end, limit, gen, id (see create_sale.lua)
--   2 stock     units left
--   3 users     hash user -> units bought
--   4 requests  hash request id -> "<order id>|<quantity>" of its purchase
--   5 orders    stream of order events
--   6 seq       last order number
-- Only purchases are remembered per request id: a refusal changed nothing,
-- so retrying it with the same id simply asks again.

-- Reads the sale once per call; nil if it does not exist.
local function load_sale()
  local m = redis.call('HMGET', KEYS[1], 'start', 'end', 'limit', 'gen', 'id')
  if not m[4] then
    return nil
  end
  local t = redis.call('TIME')
  return {
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
    start = tonumber(m[1]),
    stop = tonumber(m[2]),
    limit = tonumber(m[3]),
    prefix = m[5] .. '-' .. m[4] .. '-',
    left = tonumber(redis.call('GET', KEYS[2]) or '0'),
    seq = tonumber(redis.call('GET', KEYS[6]) or '0'),
    sold = 0,
  }
end

-- One purchase against the loaded sale. Stock and order numbers are kept in
-- `s` and written back once by `finish`, so a batch pays for them once.
local function buy(s, user, qty, req)
  if req ~= '' then
    local prev = redis.call('HGET', KEYS[4], req)
    if prev then
      return {'dup', prev}
    end
  end
  if s.now < s.start then
    return {'not_started'}
  end
  if s.stop > 0 and s.now >= s.stop then
    return {'ended'}
  end
  if s.limit > 0 then
    local bought = tonumber(redis.call('HGET', KEYS[3], user) or '0')
    if bought + qty > s.limit then
      return {'limit'}
    end
  end
  if s.left < qty then
    return {'sold_out'}
  end
  s.left = s.left - qty
  s.sold = s.sold + qty
  s.seq = s.seq + 1
  local id = s.prefix .. string.format('%d', s.seq)
  redis.call('HINCRBY', KEYS[3], user, qty)
  redis.call('XADD', KEYS[5], '*', 'type', 'purchase', 'order', id, 'user', user,
    'qty', qty, 'req', req, 'ts', string.format('%d', s.now))
  if req ~= '' then
    redis.call('HSET', KEYS[4], req, id .. '|' .. qty)
  end
  return {'ok', id, qty}
end

local function finish(s)
  if s.sold > 0 then
    redis.call('DECRBY', KEYS[2], s.sold)
    redis.call('SET', KEYS[6], string.format('%d', s.seq))
  end
end
