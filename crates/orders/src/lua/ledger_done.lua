-- Acknowledges ledger entries a persister committed to SQL, files the
-- sales they told a purchase of in the due index, moves the busy ones to
-- the news set, then drops every entry below the oldest still pending or
-- not yet delivered. Done at the acknowledgement, not at the read: what a
-- persister read and died with is filed by the one that takes it over.
-- KEYS: 1 a master's ledger  2 its due index  3 its news set (layout:
--       news.rs).
-- ARGV: group, D, B, then D pairs (pay-by ms, member: a sale hash key, or
--       one and an order of it, ledger.rs's Told::dues), B busy sale hash
--       keys, then the ids committed.
-- Returns how many were acknowledged.
-- Cost: XACK, XPENDING (its summary), XINFO GROUPS when nothing is
-- pending, and XTRIM, whatever the number of sales; one ZADD per 1,000
-- dues; per busy sale HGET, SADD, and XGROUP SETID and HDEL if armed.
local group, d, b = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
-- One ZADD per 1,000 pairs (inside Lua's unpack limit), not one each. LT:
-- a sale stays filed under the earliest time, as acknowledgements may
-- come out of order (a read taken over after a later one was committed);
-- a time already past costs one sweep that files it again.
for i = 4, 3 + 2 * d, 2000 do
  redis.call('ZADD', KEYS[2], 'LT', unpack(ARGV, i, math.min(i + 1999, 3 + 2 * d)))
end
for i = 4 + 2 * d, 3 + 2 * d + b do
  -- Busy: its own stream is read from the next round on, past what it
  -- told, which is all its stream holds past its group while it is armed
  -- (see tell, the engine's lua/prelude.lua): the group moves to its end
  -- first. Not when it is no longer armed: what its stream holds past the
  -- group was not told. A pcall: the sale's key is not declared, and its
  -- slot may have moved; it then stays armed, and told here.
  local sale = ARGV[i]
  local n = redis.pcall('HGET', sale, 'n')
  if type(n) ~= 'table' then
    local told_to = n and string.match(n, '^%S+ (%S+) %d+$')
    if told_to then
      redis.pcall('XGROUP', 'SETID', string.sub(sale, 1, -6) .. ':orders', told_to, '$')
      redis.call('HDEL', sale, 'n')
    end
    redis.call('SADD', KEYS[3], sale)
  end
end
local first = 4 + 2 * d + b
local acked = redis.call('XACK', KEYS[1], group, unpack(ARGV, first))
local pending = redis.call('XPENDING', KEYS[1], group)
local floor
if pending[1] > 0 then
  floor = pending[2]
else
  -- Nothing pending: every entry delivered to the group is acknowledged,
  -- and those not delivered yet come after the last one it delivered. Not
  -- after the last acknowledged here: ids read from a master that has
  -- since failed over were never delivered on this one, which may hold
  -- entries below them still to be read.
  local last
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local fields = {}
    for i = 1, #g, 2 do
      fields[g[i]] = g[i + 1]
    end
    if fields['name'] == group then
      last = fields['last-delivered-id']
    end
  end
  local ms, seq = string.match(last or '0-0', '^(%d+)-(%d+)$')
  floor = ms .. '-' .. string.format('%d', tonumber(seq) + 1)
end
redis.call('XTRIM', KEYS[1], 'MINID', floor)
return acked
