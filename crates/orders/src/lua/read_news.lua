-- A persister's next batches from one master's sales: those in its news
-- set and those named. (Its ledger is read beside this, with a plain
-- XREADGROUP: read inside a script, every entry's reply would be turned
-- into Lua values and back, which costs Redis more than the read.)
-- KEYS: 1 the master's news set  2 its readers hash  3 its ledger (layout:
--       news.rs).
-- ARGV: group, consumer, most entries per sale, most sales from the news
--       set, '1' on a cluster (else ''), then sale hash keys to read
--       whether or not they have news.
-- Returns { 1 if the news set still holds more else 0, then per sale with
-- something new its id and its entries, one per line: "<id> <name>
-- <value> …" (seckill_engine::Event::decode_lines) }; a sale that could
-- not be read (its slot moving) gives its id and '!' then the error.
-- A sale's stream is read with NOACK and each batch recorded as one field
-- of the sale's persisting hash, "<first id>" -> "<last id> <entries> <ms>
-- <consumer>", until committed (persister.rs).
-- A quiet sale is told through the ledger and a busy one read from its own
-- stream, where one read serves many of its events and its purchases pay
-- nothing to tell: a sale read to its end with fewer than QUIET entries is
-- armed (`n`, see tell, crates/engine/src/lua/prelude.lua), its later
-- entries told through the ledger, and its stream not read while it stays
-- armed (all it holds past the group was told); one told more than
-- ledger.rs's BUSY in one read of the ledger is disarmed and put in the
-- news set when committed (ledger_done.lua), and stays there, read each
-- round, until a read finds it quiet again.
-- Cost: TIME, HSET, SPOP; per sale HMGET, XREADGROUP unless armed (+HSET
-- of the batch, but none for a new sale's opening entry alone, +ZADD for a
-- purchase, +HDEL and HSET to arm or SADD when busy, +EXISTS on a cluster).
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = string.format('%d', now_ms())
redis.call('HSET', KEYS[2], consumer, now)
local due = KEYS[1] .. ':due'
local out = { 0 }
local QUIET = 4

local sales = redis.call('SPOP', KEYS[1], ARGV[4])
if #sales == tonumber(ARGV[4]) then
  out[1] = 1
end
local cluster = ARGV[5] == '1'
for i = 6, #ARGV do
  sales[#sales + 1] = ARGV[i]
end

local function read(stream)
  return redis.pcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'NOACK',
    'STREAMS', stream, '>')
end
for _, sale in ipairs(sales) do
  -- seckill:{sale:<id>}:sale -> seckill:{sale:<id>} and <id>
  local base, id = string.sub(sale, 1, -6), string.sub(sale, 15, -7)
  local stream, persisting = base .. ':orders', base .. ':persisting'
  -- The sale's keys are not declared: while its slot moves to another
  -- master, some may be gone from here, and a write to one of them would
  -- fail after the read above it took effect (entries delivered with no
  -- record of their batch: lost to the persisters). A look at all of them
  -- first fails instead, before anything is done, and is answered: the
  -- persister reads the sale again, from its master once the slot settled.
  -- One server has no slots to move.
  local r = cluster and redis.pcall('EXISTS', sale, stream, persisting)
  -- Also says whether the sale is still there to arm.
  local m
  if not (type(r) == 'table' and r.err) then
    m = redis.call('HMGET', sale, 'payment_timeout', 'n', 'l')
    -- Armed: all its stream holds past the group was told, and is read
    -- from the ledger (see tell, crates/engine/src/lua/prelude.lua).
    r = not (m[2] and string.find(m[2], '^%S+ %S+ %d+$')) and read(stream)
  end
  if type(r) == 'table' and r.err then
    if string.find(r.err, '^NOGROUP') and redis.call('EXISTS', sale) == 1 then
      redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
      r = read(stream)
    elseif string.find(r.err, '^NOGROUP') then
      r = 'gone'
    end
  end
  if type(r) == 'table' and r.err then
    out[#out + 1] = id
    out[#out + 1] = '!' .. r.err
  elseif r ~= 'gone' then
    local e = r and r[1][2] or {}
    -- A new sale's stream holds only the entry that opened it
    -- (create_sale.lua), which carries no order: read, nothing to file.
    if #e == 1 and e[1][2] and e[1][2][1] == 'o' then
      e = {}
    end
    local first_buy
    if #e > 0 then
      redis.call('HSET', persisting, e[1][1],
        e[#e][1] .. ' ' .. #e .. ' ' .. now .. ' ' .. consumer)
      local lines = {}
      for j, entry in ipairs(e) do
        local f = entry[2] or {}
        if not first_buy and f[1] == 'b' then
          first_buy = entry[1]
        end
        lines[j] = entry[1] .. ' ' .. table.concat(f, ' ')
      end
      out[#out + 1] = id
      out[#out + 1] = table.concat(lines, '\n')
    end
    local timeout = m[1]
    if first_buy and timeout then
      local at = tonumber(string.match(first_buy, '^(%d+)')) + tonumber(timeout) * 1000
      redis.call('ZADD', due, 'NX', string.format('%d', at), sale)
    end
    if #e == count then
      redis.call('SADD', KEYS[1], sale)
      out[1] = 1
    elseif #e >= QUIET then
      -- Busy: read again next round, nothing told meanwhile.
      redis.call('SADD', KEYS[1], sale)
    elseif timeout then
      -- Read to its end: what is appended next is told in the ledger
      -- (see tell, prelude.lua), written only when it changed.
      -- `l` names the ledger after a busy sale is disarmed too: what it
      -- told may still wait there (backlog.rs counts it).
      local armed = KEYS[3] .. ' ' .. group .. ' ' .. timeout
      if m[2] ~= armed or m[3] ~= KEYS[3] then
        redis.call('HSET', sale, 'n', armed, 'l', KEYS[3])
      end
      -- An earlier release's atomic purchase looks at `n` only once it
      -- finds 'q' absent (this release's reads `n` at once: purchase.lua);
      -- this goes once no release that writes 'q' shares the server.
      redis.call('HDEL', sale, 'q')
    end
  end
end
return out
