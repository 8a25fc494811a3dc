-- Takes the units of transfer t out of the shard it moves them from: at
-- most what the shard has left. Idempotent: asked again for t, it answers
-- what it took the first time.
-- KEYS: 1 the shard's hash.
-- ARGV: generation, refiller's fence, transfer t, units wanted.
-- Returns the units taken (0-wanted), or 'stale' (a later transfer took
-- from it since: t is long finished), 'fenced', 'no_sale'.
-- Cost: 2 redis.calls, once per give-back.
local m = redis.call('HMGET', KEYS[1], 'gen', 'fence', 'xout', 'xout_n', 'left', 'stock')
local refusal = refused(m[1], m[2], ARGV[1], ARGV[2])
if refusal then
  return refusal
end
local t = tonumber(ARGV[3])
local last = tonumber(m[3] or '0')
if last == t then
  -- A later refiller finishing it: from now on, older ones are refused here.
  redis.call('HSET', KEYS[1], 'fence', ARGV[2])
  return tonumber(m[4])
end
if last > t then
  redis.call('HSET', KEYS[1], 'fence', ARGV[2])
  return 'stale'
end
local left = tonumber(m[5])
local n = math.max(0, math.min(tonumber(ARGV[4]), left))
redis.call('HSET', KEYS[1], 'left', string.format('%d', left - n),
  'stock', string.format('%d', tonumber(m[6]) - n), 'xout', ARGV[3],
  'xout_n', string.format('%d', n), 'fence', ARGV[2])
return n
