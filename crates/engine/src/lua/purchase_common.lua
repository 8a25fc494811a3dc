-- Shared head of the purchase scripts. KEYS, always in this order:
--   1 meta      hash: start, end, limit, gen, id (see create_sale.lua)
--   2 stock     units left
--   3 users     hash user -> units bought
--   4 requests  hash request id -> "<order id>|<quantity>" of its purchase
--   5 orders    stream of order events: a purchase is {order, user, qty[, req]}
--   6 seq       last order number
--   7 states    hash order id -> "<state>|<user>|<qty>|<pay by ms>"
--   8 pending   sorted set of unpaid order ids by pay-by time
-- ARGV: user, quantity, request id ('' for none), repeated once per purchase.
--
-- Each answer is one string (cheaper for a batch than a table per answer):
-- 'ok|<order id>|<qty>' | 'dup|<order id>|<qty>' | 'sold_out' | 'limit' |
-- 'not_started' | 'ended' | 'no_sale'.
-- Only purchases are remembered per request id: a refusal changed nothing,
-- so retrying it with the same id simply asks again.
--
-- Every call of redis.call costs more than the command itself, so the sale,
-- the buyers' counts and the request ids are read once per call (HMGET) and
-- written back once (HSET) by `finish`; per purchase only the XADD remains.

-- Reads what the purchases in ARGV need; nil if the sale does not exist.
local function load_sale()
  local m = redis.call('HMGET', KEYS[1], 'start', 'end', 'limit', 'gen', 'id', 'payment_timeout')
  if not m[4] then
    return nil
  end
  local t = redis.call('TIME')
  local s = {
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
    start = tonumber(m[1]),
    stop = tonumber(m[2]),
    limit = tonumber(m[3]),
    prefix = m[5] .. '-' .. m[4] .. '-',
    pay_ms = tonumber(m[6] or '0') * 1000,
    left = tonumber(redis.call('GET', KEYS[2]) or '0'),
    seq = tonumber(redis.call('GET', KEYS[6]) or '0'),
    sold = 0,
    bought = {},
    answers = {},
    dirty_users = {},
    new_answers = {},
    new_states = {},
    new_pending = {},
  }
  local users, reqs = {}, {}
  for i = 1, #ARGV, 3 do
    users[#users + 1] = ARGV[i]
    if ARGV[i + 2] ~= '' then
      reqs[#reqs + 1] = ARGV[i + 2]
    end
  end
  local counts = redis.call('HMGET', KEYS[3], unpack(users))
  for i, user in ipairs(users) do
    s.bought[user] = tonumber(counts[i] or '0')
  end
  if #reqs > 0 then
    local known = redis.call('HMGET', KEYS[4], unpack(reqs))
    for i, req in ipairs(reqs) do
      if known[i] then
        s.answers[req] = known[i]
      end
    end
  end
  return s
end

-- One purchase against the loaded sale, exactly as if it ran alone.
local function buy(s, user, qty, req)
  if req ~= '' and s.answers[req] then
    return 'dup|' .. s.answers[req]
  end
  if s.now < s.start then
    return 'not_started'
  end
  if s.stop > 0 and s.now >= s.stop then
    return 'ended'
  end
  local bought = s.bought[user]
  if s.limit > 0 and bought + qty > s.limit then
    return 'limit'
  end
  if s.left < qty then
    return 'sold_out'
  end
  s.left = s.left - qty
  s.sold = s.sold + qty
  s.seq = s.seq + 1
  s.bought[user] = bought + qty
  s.dirty_users[user] = true
  local id = s.prefix .. s.seq
  local pay_by = string.format('%d', s.now + s.pay_ms)
  local n = #s.new_states
  s.new_states[n + 1] = id
  s.new_states[n + 2] = 'pending_payment|' .. user .. '|' .. qty .. '|' .. pay_by
  s.new_pending[n + 1] = pay_by
  s.new_pending[n + 2] = id
  -- The entry id carries the time; an entry without `type` is a purchase.
  if req ~= '' then
    s.answers[req] = id .. '|' .. qty
    s.new_answers[#s.new_answers + 1] = req
    s.new_answers[#s.new_answers + 1] = s.answers[req]
    redis.call('XADD', KEYS[5], '*', 'order', id, 'user', user, 'qty', qty, 'req', req)
  else
    redis.call('XADD', KEYS[5], '*', 'order', id, 'user', user, 'qty', qty)
  end
  return 'ok|' .. id .. '|' .. qty
end

local function finish(s)
  if s.sold == 0 then
    return
  end
  redis.call('DECRBY', KEYS[2], s.sold)
  redis.call('SET', KEYS[6], string.format('%d', s.seq))
  local counts = {}
  for user in pairs(s.dirty_users) do
    counts[#counts + 1] = user
    counts[#counts + 1] = s.bought[user]
  end
  redis.call('HSET', KEYS[3], unpack(counts))
  if #s.new_answers > 0 then
    redis.call('HSET', KEYS[4], unpack(s.new_answers))
  end
  redis.call('HSET', KEYS[7], unpack(s.new_states))
  redis.call('ZADD', KEYS[8], unpack(s.new_pending))
end
