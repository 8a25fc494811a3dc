-- Shared head of the order lifecycle scripts.
-- KEYS, always in this order: 1 sale hash  2 order stream  3 settled orders
-- (hash "<ms>-<n>-<i>" -> "<state>|<user>|<qty>").
-- An order "<sale>-<gen>-<ms>-<n>-<i>" is pair i of purchase entry <ms>-<n>
-- (see purchase.lua). It is pending while it has no settled state; states:
-- pending_payment -> paid | cancelled | expired. Every change appends one
-- entry {<state> <gen>, then "<ref> <user>|<qty>" per order} to the stream so
-- SQL follows.

-- The buyer and quantity of order `ref` from its purchase entry, or nil.
local function purchase_of(gen, ref)
  local entry, i = string.match(ref, '^(%d+%-%d+)%-(%d+)$')
  if not entry then
    return nil
  end
  local found = redis.call('XRANGE', KEYS[2], entry, entry)[1]
  if not found or found[2][1] ~= 'b' or found[2][2] ~= gen then
    return nil
  end
  local f = found[2]
  local k = 3 + 2 * tonumber(i)
  if not f[k] then
    return nil
  end
  local qty = string.match(f[k + 1], '^(%d+)')
  if qty == '0' then
    return nil
  end
  return f[k], qty
end

-- Moves pending orders ({ref, user, qty} each) to `state`. Cancelled and
-- expired orders give their units back to the stock and, where the sale has
-- a limit, to the buyer's allowance; a sale that had none left says so on
-- the restock channel (one that had some sent it when they came back, and
-- a service's sold-out marks expire on their own besides).
-- `n`: the sale hash's field `n` as read, to tell the persisters (see tell,
-- prelude.lua); told, the event is not appended to the sale's stream.
-- `also`: more fields for the sale hash ({name, value, …}, or nil),
-- written with its counts in one HSET. `written`: the orders' states are
-- already in the settled hash.
local function settle(sale, gen, limit, orders, state, n, also, written)
  local writes = also or {}
  local states, event = {}, { state, gen }
  local back, per_user = 0, {}
  for _, o in ipairs(orders) do
    local value = o[2] .. '|' .. o[3]
    if not written then
      states[#states + 1] = o[1]
      states[#states + 1] = state .. '|' .. value
    end
    event[#event + 1] = o[1]
    event[#event + 1] = value
    local qty = tonumber(o[3])
    back = back + qty
    per_user[o[2]] = (per_user[o[2]] or 0) + qty
  end
  if not written then
    redis.call('HSET', KEYS[3], unpack(states))
  end
  if state ~= 'paid' then
    -- One read and one write for the units and every buyer's count,
    -- however many buyers the wave holds (at most 3,000, inside Lua's
    -- unpack limit).
    local fields, units = { 'left' }, {}
    if limit > 0 then
      for user, n in pairs(per_user) do
        fields[#fields + 1] = 'u:' .. user
        units[#units + 1] = n
      end
    end
    local held = redis.call('HMGET', KEYS[1], unpack(fields))
    local left = tonumber(held[1] or '0')
    writes[#writes + 1] = 'left'
    -- Redis would write these numbers with '%.17g', far dearer than '%d'.
    writes[#writes + 1] = string.format('%d', left + back)
    for i = 2, #fields do
      writes[#writes + 1] = fields[i]
      writes[#writes + 1] = string.format('%d', tonumber(held[i] or '0') - units[i - 1])
    end
    if left <= 0 then
      redis.call('PUBLISH', 'seckill:restock', sale)
    end
  end
  if #writes > 0 then
    redis.call('HSET', KEYS[1], unpack(writes))
  end
  -- Told through the ledger, a settlement skips the sale's stream.
  if not tell(n, KEYS[1], KEYS[2], nil, event) then
    redis.call('XADD', KEYS[2], '*', unpack(event))
  end
end
