-- Begins transfer number xseq+1 of a sharded sale: units from the pool
-- (taken here, at once) or from a shard (taken next, by shard_take) to a
-- shard. One transfer is open at a time: if one is, it is answered instead,
-- for the caller to finish first (shard/transfer.rs).
-- KEYS: 1 the sale's hash (its `left` is the pool).
-- ARGV: generation, refiller's fence, from ('p' for the pool, or a shard's
--       index), to (a shard's index), units wanted.
-- Returns 'new:<t>|<from>|<to>|<units>' (from the pool: the units taken;
-- from a shard: the units asked, as shard_take may find fewer), or
-- 'open:<the same, of the transfer still open>', or 'empty' (the pool has
-- none; nothing begun), 'fenced' (a refiller with a later fence acted),
-- 'no_sale'.
-- Cost: 2 redis.calls, once per transfer (a transfer moves many units).
local m = redis.call('HMGET', KEYS[1], 'gen', 'fence', 'xopen', 'xseq', 'left')
local refusal = refused(m[1], m[2], ARGV[1], ARGV[2])
if refusal then
  return refusal
end
if not m[4] then
  return 'no_sale'
end
if m[3] and m[3] ~= '' then
  return 'open:' .. m[3]
end
local t = tonumber(m[4]) + 1
local left = tonumber(m[5])
local units = tonumber(ARGV[5])
if ARGV[3] == 'p' then
  units = math.min(units, left)
  if units <= 0 then
    return 'empty'
  end
  left = left - units
end
local open = string.format('%d|%s|%s|%d', t, ARGV[3], ARGV[4], units)
redis.call('HSET', KEYS[1], 'xopen', open, 'xseq', string.format('%d', t), 'fence', ARGV[2],
  'left', string.format('%d', left))
return 'new:' .. open
