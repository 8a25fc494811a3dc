-- The floor under purchase.lua, for `seckill bench --compare`: the Redis
-- commands a purchase with a request id sends, on the same keys with
-- arguments of the same sizes, and nothing else: no checks, no numbers, no
-- strings built. Whatever this costs, no purchase sending these commands
-- can cost less; what purchase.lua costs above it is its own logic.
-- KEYS: 1 sale hash  2 order stream (a sale of its own: this writes fixed
-- values into it).
-- ARGV: generation, user, request field "r:<user>/<id>", event value
--       "<qty>|<id>", order reference "<ms>-<n>-0|<qty>", then 'refusal'
--       to stop after the read, as a refusal does.
-- Returns the entry id, or 'sold_out' for a refusal.
redis.call('HMGET', KEYS[1], 'gen', 'left', 'end', 'n', ARGV[3])
if ARGV[6] then
  return 'sold_out'
end
local entry = redis.call('XADD', KEYS[2], '*', 'b', ARGV[1], ARGV[2], ARGV[4])
redis.call('HSET', KEYS[1], 'left', '999999', ARGV[3], ARGV[5])
return entry
