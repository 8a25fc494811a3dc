-- The sales of one master with an order due by now, by the server's clock.
-- KEYS: 1 the master's due index (layout: news.rs).
-- ARGV: most sales to answer.
-- Returns their ids. Cost: TIME and one ZRANGEBYSCORE, whatever the number
-- of sales.
local now = now_ms()
local keys = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now), 'LIMIT', 0,
  tonumber(ARGV[1]))
for i, sale in ipairs(keys) do
  -- seckill:{sale:<id>}:sale -> <id>
  keys[i] = string.sub(sale, 15, -7)
end
return keys
