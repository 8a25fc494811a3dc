-- Ends transfer t of a sharded sale once its units are on the shard they
-- went to: records it in the sale's ledger of transfers and closes it.
-- Idempotent: a transfer no longer open answers 'done'.
-- KEYS: 1 the sale's hash  2 its transfers stream (the ledger).
-- ARGV: generation, refiller's fence, transfer t, units it moved.
-- Returns 'ok', 'done', 'fenced', 'no_sale'.
-- Cost: 3 redis.calls, once per transfer.
local m = redis.call('HMGET', KEYS[1], 'gen', 'fence', 'xopen')
local refusal = refused(m[1], m[2], ARGV[1], ARGV[2])
if refusal then
  return refusal
end
local open = m[3] or ''
local t, from, to = string.match(open, '^(%d+)|([^|]*)|([^|]*)|')
if t ~= ARGV[3] then
  -- Ended before: from now on, older refillers are refused here.
  redis.call('HSET', KEYS[1], 'fence', ARGV[2])
  return 'done'
end
redis.call('XADD', KEYS[2], '*', 't', t, 'from', from, 'to', to, 'n', ARGV[4], 'fence', ARGV[2])
redis.call('HSET', KEYS[1], 'xopen', '', 'fence', ARGV[2])
return 'ok'
