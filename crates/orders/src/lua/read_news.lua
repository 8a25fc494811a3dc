-- A persister's next batches from one master: the events in its ledger,
-- then the sales in its news set and those named.
-- KEYS: 1 the master's news set  2 its readers hash  3 its ledger (layout:
--       news.rs).
-- ARGV: group, consumer, most entries per sale and from the ledger, most
--       sales from the news set, '1' on a cluster (else ''), then sale hash
--       keys to read whether or not they have news.
-- Returns { 1 if the news set or the ledger still holds more else 0, the
-- ledger ids read (space-separated, '' if none), how many (sale id,
-- entries) pairs follow from the ledger, then per sale with something new
-- its id and its entries, one per line: "<id> <name> <value> …"
-- (seckill_engine::Event::decode_lines) }; a sale that could not be read
-- (its slot moving) gives its id and '!' then the error.
-- The ledger is read into the group's pending list, acknowledged once
-- committed (lua/ledger_done.lua), taken over with XAUTOCLAIM. A sale's
-- stream is read with NOACK and each batch recorded as one field of the
-- sale's persisting hash, "<first id>" -> "<last id> <entries> <ms>
-- <consumer>", until committed (persister.rs).
-- A quiet sale is told through the ledger and a busy one read from its own
-- stream, where one read serves many of its events and its purchases pay
-- nothing to tell: a sale read to its end with fewer than QUIET entries is
-- armed (`n`, see tell, crates/engine/src/lua/prelude.lua), its later
-- entries told through the ledger; one with more than BUSY entries in one
-- read of the ledger is disarmed and put in the news set, and stays there,
-- read each round, until a read finds it quiet again.
-- Cost: TIME, HSET, XREADGROUP of the ledger, SPOP; per sale told in the
-- ledger with a purchase its pair in one ZADD of the due index (+HDEL,
-- SADD when busy);
-- per sale read XREADGROUP, HMGET (+HSET of the batch, +ZADD for a
-- purchase, +HDEL and HSET to arm or SADD when busy, +EXISTS on a
-- cluster).
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = string.format('%d', now_ms())
redis.call('HSET', KEYS[2], consumer, now)
local due = KEYS[1] .. ':due'
local out = { 0, '', 0 }
local QUIET, BUSY = 4, 16

-- Taken first: a sale the ledger's read puts in the set waits for the
-- next round.
local sales = redis.call('SPOP', KEYS[1], ARGV[4])
if #sales == tonumber(ARGV[4]) then
  out[1] = 1
end
local cluster = ARGV[5] == '1'
for i = 6, #ARGV do
  sales[#sales + 1] = ARGV[i]
end

-- The ledger: entries { sale hash key, "<entry id> <timeout>" or '*', event … }.
local function read_ledger()
  return redis.pcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
    'STREAMS', KEYS[3], '>')
end
local r = read_ledger()
if type(r) == 'table' and r.err and string.find(r.err, '^NOGROUP') then
  redis.call('XGROUP', 'CREATE', KEYS[3], group, '0', 'MKSTREAM')
  r = read_ledger()
end
if type(r) == 'table' and r.err then
  return redis.error_reply(r.err)
end
local told = r and r[1][2] or {}
if #told > 0 then
  local ids, lines, order, dues = {}, {}, {}, {}
  for i, e in ipairs(told) do
    ids[i] = e[1]
    local f = e[2]
    local sale = f[1]
    -- '*': told alone, its id the ledger entry's.
    local entry, timeout = e[1], nil
    if f[2] ~= '*' then
      entry, timeout = string.match(f[2], '^(%S+) (%d+)$')
    end
    local of = lines[sale]
    if not of then
      of = {}
      lines[sale] = of
      order[#order + 1] = sale
    end
    of[#of + 1] = entry .. ' ' .. table.concat(f, ' ', 3)
    if f[3] == 'b' then
      local at = tonumber(string.match(entry, '^(%d+)')) + tonumber(timeout) * 1000
      dues[#dues + 1] = string.format('%d', at)
      dues[#dues + 1] = sale
    end
  end
  -- Filed with one ZADD per 1,000 purchases (inside Lua's unpack limit),
  -- not one each: NX keeps what each sale was filed under, and a sale's
  -- first purchase here, the earliest due, is its first pair.
  for i = 1, #dues, 2000 do
    redis.call('ZADD', due, 'NX', unpack(dues, i, math.min(i + 1999, #dues)))
  end
  out[2] = table.concat(ids, ' ')
  out[3] = #order
  for _, sale in ipairs(order) do
    -- seckill:{sale:<id>}:sale -> <id>
    out[#out + 1] = string.sub(sale, 15, -7)
    out[#out + 1] = table.concat(lines[sale], '\n')
    if #lines[sale] > BUSY then
      -- Busy: its group is already past all of this (tell moved it), so
      -- its own stream is read from the next round on. A pcall: its slot
      -- may have moved; it then stays armed, and told here.
      local r = redis.pcall('HDEL', sale, 'n')
      if type(r) == 'number' then
        redis.call('SADD', KEYS[1], sale)
      end
    end
  end
  if #told == count then
    out[1] = 1
  end
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
  r = cluster and redis.pcall('EXISTS', sale, stream, persisting)
  if not (type(r) == 'table' and r.err) then
    r = read(stream)
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
    -- Also says whether the sale is still there to arm.
    local m = redis.call('HMGET', sale, 'payment_timeout', 'n')
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
      local armed = KEYS[3] .. ' ' .. group .. ' ' .. timeout
      if m[2] ~= armed then
        redis.call('HSET', sale, 'n', armed)
      end
      -- An atomic purchase looks at `n` only once it finds 'q' absent
      -- (purchase.lua).
      redis.call('HDEL', sale, 'q')
    end
  end
end
return out
