-- Expires unpaid orders past their pay-by time, oldest first.
-- ARGV: sale id, most stream entries to look at.
-- Returns { orders expired, 1 if more may be due else 0 }.
--
-- The stream is in pay-by order already (an order's pay-by time is its
-- entry's time plus the sale's payment timeout), so the sweep walks it from
-- the cursor `swept` up to now - timeout: every order it passes is settled
-- or expired here, and the persister never trims past the cursor, so every
-- pending order stays in the stream. Each order expires once: its settled
-- state is written in the same script that returns its units.
-- Cost: 3 calls to read (HMGET, XRANGE, HMGET of the orders' states), 4-5
-- to expire a wave whatever its size (see settle), 1 to move the cursor.
local sale = ARGV[1]
local m = redis.call('HMGET', KEYS[1], 'gen', 'payment_timeout', 'swept', 'limit')
if not m[1] then
  return { 0, 0 }
end
local gen = m[1]
local cutoff = now_ms() - tonumber(m[2]) * 1000
if cutoff < 0 then
  return { 0, 0 }
end
local from = m[3] and ('(' .. m[3]) or '-'
local entries = redis.call('XRANGE', KEYS[2], from, cutoff, 'COUNT', tonumber(ARGV[2]))
-- At most 3,000 orders a call: each unpacked array holds two values per
-- order, inside Lua's limit of ~8,000; an entry holds at most 1,000.
local refs, orders, last, looked = {}, {}, nil, 0
for _, e in ipairs(entries) do
  local f = e[2]
  if f[1] == 'b' and f[2] == gen then
    local count = (#f - 2) / 2
    if #orders + count > 3000 then
      break
    end
    for i = 0, count - 1 do
      local qty = string.match(f[4 + 2 * i], '^(%d+)')
      if qty ~= '0' then
        refs[#refs + 1] = e[1] .. '-' .. i
        orders[#orders + 1] = { refs[#refs], f[3 + 2 * i], qty }
      end
    end
  end
  last = e[1]
  looked = looked + 1
end
if not last then
  return { 0, 0 }
end
local due = {}
if #refs > 0 then
  local states = redis.call('HMGET', KEYS[3], unpack(refs))
  for i, o in ipairs(orders) do
    if not states[i] then
      due[#due + 1] = o
    end
  end
end
if #due > 0 then
  settle(sale, gen, tonumber(m[4]), due, 'expired')
end
redis.call('HSET', KEYS[1], 'swept', last)
local more = (looked < #entries or #entries == tonumber(ARGV[2])) and 1 or 0
return { #due, more }
