-- A persister's next batch of one sale's order stream.
-- KEYS: 1 order stream  2 persisting hash (layout: engine keys.rs).
-- ARGV: group, consumer, most entries to read.
-- Returns the entries read, as XREADGROUP returns one stream's:
-- { {id, {field, value, ...}}, ... }; empty when there is nothing new.
--
-- The group hands every entry to one consumer. It reads with NOACK, so
-- Redis keeps no per-entry pending list; instead this records the batch as
-- one field of the persisting hash: "<first id>" -> "<last id> <entries>
-- <ms read> <consumer>". The persister deletes the field once the batch is
-- committed to SQL; a field left behind (a persister that died or failed)
-- is re-read by range and persisted again by any persister after a while.
-- Nothing is overwritten: each batch has its own first id.
--
-- Cost: per batch, one HSET and one TIME beyond the read, where a pending
-- list costs per entry (filled by the read, emptied by an XACK each).
-- `seckill bench --persist-to` reports the persister's Redis time per
-- order (docs/benchmarks.md).
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'NOACK',
  'STREAMS', KEYS[1], '>')
if not r then
  return {}
end
local e = r[1][2]
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], e[1][1],
  e[#e][1] .. ' ' .. #e .. ' ' .. string.format('%d', ms) .. ' ' .. ARGV[2])
return e
