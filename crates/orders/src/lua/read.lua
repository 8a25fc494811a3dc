-- A persister's next batch of one sale's order stream.
-- KEYS: 1 order stream  2 persisting hash (layout: engine keys.rs).
-- ARGV: group, consumer, most entries to read.
-- Returns the entries read as one string, one entry per line: its id, then
-- its names and values, each after a space (the format
-- `seckill_engine::Event::decode_lines` reads); "" when there is nothing new.
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
-- The reply is flattened because parsing it was most of what a persister
-- spent per order: an atomic purchase's entry is seven reply values (entry,
-- id, field list, four strings), and one string per batch took the
-- persister thread's own CPU per order from 5.5 to 2.3 us (its thread's
-- CPU from /proc during `seckill bench --strategy atomic --stock 200000
-- --buyers 200000 --persist-to DB`), while the Redis time per order
-- stayed 0.5-0.8 us: the concats cost about what building the nested
-- reply did.
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'NOACK',
  'STREAMS', KEYS[1], '>')
if not r then
  return ''
end
local e = r[1][2]
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], e[1][1],
  e[#e][1] .. ' ' .. #e .. ' ' .. string.format('%d', ms) .. ' ' .. ARGV[2])
local lines = {}
for i, entry in ipairs(e) do
  lines[i] = entry[1] .. ' ' .. table.concat(entry[2] or {}, ' ')
end
return table.concat(lines, '\n')
