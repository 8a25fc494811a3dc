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

-- Writes `writes` ({name, value, …}) to the sale hash in one HSET, then
-- tells the persisters of `event` (see tell, prelude.lua; `n`: the hash's
-- field `n` as read), or, not told, appends it to the sale's stream: told
-- through the ledger, a settlement skips the sale's stream.
local function record(writes, event, n)
  if #writes > 0 then
    redis.call('HSET', KEYS[1], unpack(writes))
  end
  if not tell(n, KEYS[1], KEYS[2], nil, unpack(event)) then
    redis.call('XADD', KEYS[2], '*', unpack(event))
  end
end

-- Moves one pending order {ref, user, qty} to `state`. A cancelled or
-- expired order gives its units back to the stock and, where the sale has
-- a limit, to the buyer's allowance; a sale that had none left says so on
-- the restock channel (one that had some sent it when they came back, and
-- a service's sold-out marks expire on their own besides).
-- `left`: the sale hash's field `left` as read by the caller in the read
-- it makes anyway (one field more there is cheaper than a read here).
-- `n`: its field `n` as read (see record). `also`: more fields for the
-- sale hash ({name, value, …}, or nil), written with the units in one HSET.
-- `written`: the order's state is already in the settled hash.
-- Cost: HSET of the state unless `written`; to give units back HINCRBY of
-- the buyer's count with a limit (+PUBLISH when none were left); HSET of
-- the sale; tell's (or an XADD).
local function settle(sale, gen, limit, left, o, state, n, also, written)
  local value = o[2] .. '|' .. o[3]
  if not written then
    redis.call('HSET', KEYS[3], o[1], state .. '|' .. value)
  end
  local writes = also or {}
  if state ~= 'paid' then
    local qty, had = tonumber(o[3]), tonumber(left or '0')
    if limit > 0 then
      redis.call('HINCRBY', KEYS[1], 'u:' .. o[2], -qty)
    end
    writes[#writes + 1] = 'left'
    -- Redis would write this number with '%.17g', far dearer than '%d'.
    writes[#writes + 1] = string.format('%d', had + qty)
    if had <= 0 then
      redis.call('PUBLISH', 'seckill:restock', sale)
    end
  end
  record(writes, { state, gen, o[1], value }, n)
end

-- Expires a wave of pending orders ({ref, user, qty} each) of one sale at
-- once, as settle would each (`n` and `also` as there): one write of
-- their states, one read and one write for the units and every buyer's
-- count, one event, however many buyers the wave holds (at most 3,000,
-- inside Lua's unpack limit).
local function expire_wave(sale, gen, limit, orders, n, also)
  local states, event = {}, { 'expired', gen }
  local back, per_user = 0, {}
  for _, o in ipairs(orders) do
    local value = o[2] .. '|' .. o[3]
    states[#states + 1] = o[1]
    states[#states + 1] = 'expired|' .. value
    event[#event + 1] = o[1]
    event[#event + 1] = value
    local qty = tonumber(o[3])
    back = back + qty
    per_user[o[2]] = (per_user[o[2]] or 0) + qty
  end
  redis.call('HSET', KEYS[3], unpack(states))
  local fields, units = { 'left' }, {}
  if limit > 0 then
    for user, n in pairs(per_user) do
      fields[#fields + 1] = 'u:' .. user
      units[#units + 1] = n
    end
  end
  local held = redis.call('HMGET', KEYS[1], unpack(fields))
  local left = tonumber(held[1] or '0')
  local writes = also or {}
  writes[#writes + 1] = 'left'
  writes[#writes + 1] = string.format('%d', left + back)
  for i = 2, #fields do
    writes[#writes + 1] = fields[i]
    writes[#writes + 1] = string.format('%d', tonumber(held[i] or '0') - units[i - 1])
  end
  if left <= 0 then
    redis.call('PUBLISH', 'seckill:restock', sale)
  end
  record(writes, event, n)
end
