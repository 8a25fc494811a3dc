-- The sales of one master with an order due by now, by the server's clock.
-- KEYS: 1 the master's due index (layout: news.rs).
-- ARGV: most sales to answer.
-- Returns their ids, each once. Cost: TIME and one ZRANGEBYSCORE, whatever
-- the number of sales.
local now = now_ms()
local keys = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now), 'LIMIT', 0,
  tonumber(ARGV[1]))
-- A member is a sale hash key, or one and an order of it after a space
-- (crates/engine/src/lua/expire_due.lua): each sale once.
local ids, seen = {}, {}
for _, member in ipairs(keys) do
  -- seckill:{sale:<id>}:sale -> <id>
  local id = string.sub(member, 15, (string.find(member, ' ', 1, true) or 0) - 7)
  if not seen[id] then
    seen[id] = true
    ids[#ids + 1] = id
  end
end
return ids
