-- Adds the units of transfer t to the shard they move to. Idempotent:
-- transfers are applied in order, so one at or below the last applied is
-- done already.
-- KEYS: 1 the shard's hash.
-- ARGV: generation, refiller's fence, transfer t, units.
-- Returns 'ok', 'done' (applied before), 'fenced', 'no_sale'.
-- Cost: 2 redis.calls, once per transfer.
local m = redis.call('HMGET', KEYS[1], 'gen', 'fence', 'xin', 'left', 'stock')
local refusal = refused(m[1], m[2], ARGV[1], ARGV[2])
if refusal then
  return refusal
end
if tonumber(m[3] or '0') >= tonumber(ARGV[3]) then
  -- A later refiller finishing it: from now on, older ones are refused here.
  redis.call('HSET', KEYS[1], 'fence', ARGV[2])
  return 'done'
end
local n = tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'left', string.format('%d', tonumber(m[4]) + n),
  'stock', string.format('%d', tonumber(m[5]) + n), 'xin', ARGV[3], 'fence', ARGV[2])
return 'ok'
