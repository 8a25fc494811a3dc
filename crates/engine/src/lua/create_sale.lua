-- Creates a sale, or one shard of a sharded sale.
-- KEYS: 1 sale hash  2 counter (the classic strategies' stock key)  3 token list
--       4 order stream.
-- ARGV: id, name, stock, inventory ('hash' | 'counter' | 'list'), payment
--       timeout s, 6 a sharded sale's generation ('' = now, for the sale
--       itself; a shard takes its sale's), 7 its shards' tags ('1,7,12';
--       '' for none), then the rules as field, value pairs (rules.rs).
-- Returns the sale's generation (creation time in ms), or 0 if it exists.
-- Cost: 4-5 redis.calls, once per sale (the list inventory more).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local gen
if ARGV[6] ~= '' then
  gen = tonumber(ARGV[6])
else
  gen = now_ms()
end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'name', ARGV[2], 'stock', ARGV[3],
  'inventory', ARGV[4], 'payment_timeout', ARGV[5], 'gen', string.format('%d', gen),
  unpack(ARGV, 8))
if ARGV[7] ~= '' then
  -- A sharded sale: `left` is its pool; transfers are numbered from 1.
  redis.call('HSET', KEYS[1], 'shards', ARGV[7], 'xseq', '0', 'fence', '0', 'drained', '0')
end
-- The stream's first entry, 'o' (opened) and the generation, which no
-- reader takes for an order (event.rs): Redis 7 gives a stream's first
-- node 4 KB at once, which the sale's first purchase would otherwise
-- allocate and fault in, when buyers arrive: over many quiet sales, `xadd`
-- is the command whose cost grows most (docs/benchmarks.md, "Purchases
-- spread over many sales"). Any sale that sells holds that node anyway.
redis.call('XADD', KEYS[4], '*', 'o', string.format('%d', gen))
local stock = tonumber(ARGV[3])
if ARGV[4] == 'hash' then
  redis.call('HSET', KEYS[1], 'left', ARGV[3])
elseif ARGV[4] == 'list' then
  -- The list strategy's tokens, pushed in chunks to stay within unpack()'s limits.
  local chunk = {}
  for i = 1, 1000 do chunk[i] = '1' end
  local left = stock
  while left > 0 do
    local n = math.min(left, 1000)
    if n < 1000 then
      chunk = {}
      for i = 1, n do chunk[i] = '1' end
    end
    redis.call('RPUSH', KEYS[3], unpack(chunk))
    left = left - n
  end
else
  redis.call('SET', KEYS[2], stock)
end
return gen
