-- Acknowledges ledger entries a persister committed to SQL, then drops
-- every entry below the oldest still pending or not yet delivered.
-- KEYS: 1 a master's ledger (layout: news.rs).
-- ARGV: group, then the ids committed.
-- Returns how many were acknowledged.
-- Cost: XACK, XPENDING (its summary) and XTRIM, whatever the number of sales.
local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
local pending = redis.call('XPENDING', KEYS[1], ARGV[1])
local floor
if pending[1] > 0 then
  floor = pending[2]
else
  -- Nothing pending: every entry delivered is acknowledged, and those not
  -- delivered yet come after the last one acknowledged here.
  local last = ARGV[#ARGV]
  local ms, seq = string.match(last, '^(%d+)-(%d+)$')
  floor = ms .. '-' .. string.format('%d', tonumber(seq) + 1)
end
redis.call('XTRIM', KEYS[1], 'MINID', floor)
return acked
