-- expire.lua: expire_sale and its helpers (see expire_sale below).

-- Files the sale whose keys are KEYS in the due index under the time its
-- first purchase past the cursor `after` comes due (`timeout` ms after its
-- entry), or takes it out when none is left: a purchase after that is
-- filed again by the persister that reads it (read_news.lua) or commits
-- it (ledger_done.lua, both in the orders crate). Settlements and expiries
-- between are skipped, up to FILE_LOOK entries: each purchase on a quiet
-- sale is followed by its expiry, which would otherwise cost a sweep that
-- finds nothing. Past FILE_LOOK entries with no purchase, the last one's
-- time files it early (a sweep then walks the cursor past them). `rest`:
-- the entries past `after` when known to be all of them, which spares the
-- look. This and past are made once per call, not per sale: a sweep
-- of many sales would otherwise make them for each. FILE_LOOK_ARG is the
-- count as Redis reads it: a Lua number is written with '%.17g'.
local FILE_LOOK, FILE_LOOK_ARG = 8, '8'
local function file(due_index, timeout, unfile, after, rest)
  if not due_index then
    return
  end
  local next = rest or redis.call('XRANGE', KEYS[2], after and ('(' .. after) or '-', '+',
    'COUNT', FILE_LOOK_ARG)
  local at
  for _, e in ipairs(next) do
    if e[2][1] == 'b' then
      at = e[1]
      break
    end
  end
  if not at and #next == FILE_LOOK then
    at = next[#next][1]
  end
  if at then
    redis.pcall('ZADD', due_index,
      string.format('%d', tonumber(string.match(at, '^(%d+)')) + timeout), KEYS[1])
  elseif unfile then
    unfile[#unfile + 1] = KEYS[1]
  else
    redis.pcall('ZREM', due_index, KEYS[1])
  end
end

-- The entries of a first look past its `n` due ones, when it reached the
-- stream's end (`tail`); else nil. None past, what a quiet sale's look
-- holds, is one list made at load (never written to), not one per sale.
local NONE = {}
local function past(look, n, tail)
  if not tail then
    return nil
  end
  if n == #look then
    return NONE
  end
  local r = {}
  for i = n + 1, #look do
    r[#r + 1] = look[i]
  end
  return r
end

-- expire_sale(sale, most, due_index, now, unfile): expires unpaid orders of
-- one sale past their pay-by time, oldest first, looking at no more than
-- `most` stream entries; then files the sale in its master's due index
-- (sorted set of sale hash keys by when their next order comes due:
-- crates/orders/src/news.rs), or, with nothing left to come due, takes it
-- out, or adds it to the list `unfile` for the caller to take out with
-- others at once.
-- KEYS: the sale's lifecycle keys (lifecycle_common.lua), set per sale by
-- expire_due.lua, which passes its `now` (ms, server clock; read here when
-- nil). Returns the orders expired, and 1 if more may be due else 0 (two
-- values, not a table: a sweep of many sales makes none for each).
-- The stream is in pay-by order (pay-by = entry time + payment timeout), so
-- the sweep walks it from the cursor `swept`, which the persister never trims
-- past; each order expires once, its state written where its units return.
-- Cost: 3 calls to read (HMGET, XRANGE, HMGET of states, or HSETNX of the
-- one order's, which writes it too; +XRANGE when more than FILE_LOOK
-- entries are due); to expire one order and move the cursor, settle's
-- (HINCRBY with a limit, HSET, tell's), a wave 3-4 whatever its size
-- (expire_wave), or 1 to move the cursor alone; with the due
-- index a ZADD, or a ZREM unless `unfile`, +XRANGE of the next entries
-- when the first look did not reach the stream's end.
local function expire_sale(sale, most, due_index, now, unfile)
  local m = redis.call('HMGET', KEYS[1], 'gen', 'payment_timeout', 'swept', 'limit', 'n', 'left')
  if not m[1] then
    if due_index then
      redis.pcall('ZREM', due_index, KEYS[1])
    end
    return 0, 0
  end
  local gen, timeout = m[1], tonumber(m[2]) * 1000

  local cutoff = (now or now_ms()) - timeout
  if cutoff < 0 then
    file(due_index, timeout, unfile, m[3])
    return 0, 0
  end
  local from = m[3] and ('(' .. m[3]) or '-'
  -- A first look, FILE_LOOK entries to the stream's end: on a quiet sale it
  -- holds all that is left (`tail`), which then says where to file the sale
  -- with no look of its own. Its entries past the cutoff are not due; when
  -- all FILE_LOOK are, the rest up to the cutoff is read.
  local look = redis.call('XRANGE', KEYS[2], from, '+', 'COUNT', FILE_LOOK_ARG)
  local tail = #look < FILE_LOOK
  local entries, n = {}, 0
  for _, e in ipairs(look) do
    if n == most or tonumber(string.match(e[1], '^(%d+)')) > cutoff then
      break
    end
    n = n + 1
    entries[n] = e
  end
  if n == FILE_LOOK and n < most then
    for _, e in ipairs(redis.call('XRANGE', KEYS[2], '(' .. look[n][1], cutoff,
      'COUNT', most - n)) do
      n = n + 1
      entries[n] = e
    end
  end
  -- At most 3,000 orders a call: each unpacked array holds two values per
  -- order, inside Lua's limit of ~8,000; an entry holds at most 1,000.
  local refs, orders, last, looked = {}, {}, nil, 0
  for _, e in ipairs(entries) do
    local f = e[2]
    if f[1] == 'b' and f[2] == gen then
      local count = (#f - 2) / 2
      if #orders + count > 3000 then
        break
      end
      for i = 0, count - 1 do
        local qty = string.match(f[4 + 2 * i], '^(%d+)')
        if qty ~= '0' then
          -- Written by hand for the first: Lua writes numbers with sprintf.
          refs[#refs + 1] = e[1] .. (i == 0 and '-0' or '-' .. i)
          orders[#orders + 1] = { refs[#refs], f[3 + 2 * i], qty }
        end
      end
    end
    last = e[1]
    looked = looked + 1
  end
  if not last then
    file(due_index, timeout, unfile, m[3], past(look, n, tail))
    return 0, 0
  end
  local expired = 0
  if #refs == 1 then
    -- One order, what a quiet sale's sweep finds: its state written if it
    -- has none, looked at and written in one call, and its units counted
    -- back from `left` as read above.
    local o = orders[1]
    if redis.call('HSETNX', KEYS[3], o[1], 'expired|' .. o[2] .. '|' .. o[3]) == 1 then
      settle(sale, gen, tonumber(m[4]), m[6], o, 'expired', m[5], { 'swept', last }, true)
      expired = 1
    end
  elseif #refs > 0 then
    local states, due = redis.call('HMGET', KEYS[3], unpack(refs)), {}
    for i, o in ipairs(orders) do
      if not states[i] then
        due[#due + 1] = o
      end
    end
    if #due > 0 then
      expire_wave(sale, gen, tonumber(m[4]), due, m[5], { 'swept', last })
      expired = #due
    end
  end
  if expired == 0 then
    redis.call('HSET', KEYS[1], 'swept', last)
  end
  local more = (looked < n or n == most) and 1 or 0
  if more == 0 then
    -- What an expiry appended is no purchase: the rest stands.
    file(due_index, timeout, unfile, last, past(look, n, tail))
  end
  return expired, more
end

-- Whether the sale whose keys are KEYS may be moving to another master:
-- its keys are not declared by a sweep of a master's due index, and while
-- its slot moves some may be gone from here, so that a write failing
-- halfway would leave units returned without their event. A look at all
-- of them first fails instead, before anything is done (`cluster`: on a
-- cluster; one server has no slots to move).
local function moving(cluster)
  local look = cluster and redis.pcall('EXISTS', KEYS[1], KEYS[2], KEYS[3])
  return type(look) == 'table' and look.err ~= nil
end

-- Expiries told at once: what a sweep of a master's due index expires of
-- the quiet sales armed with that master's ledger (`batch.ledger`, the
-- current one: crates/orders/src/news.rs) goes to it in one entry, not
-- one each (~11,000 instructions an expiry less): after the marker
-- ('*', 'expired'), four values per order, its sale hash key, generation,
-- ref and "<buyer>|<qty>", which the persisters split
-- (crates/orders/src/ledger.rs). An earlier release's persister reads an
-- entry as one sale's, so only the ledger it never reads takes these;
-- a sale armed with another (an earlier release armed it, or its `n` is
-- not this master's) is told as tell does. Past BATCH_MOST values the
-- entry is added at once (inside Lua's unpack limit of ~8,000).
local BATCH_MOST = 4000
local function new_batch(due_index)
  -- seckill:{news:<tag>}:due -> seckill:{news:<tag>}:ledger:2
  local ledger = string.sub(due_index, 1, -5) .. ':ledger:2'
  return { ledger = ledger, armed = ledger .. ' ', fields = { '*', 'expired' } }
end

-- Adds what `batch` gathered to its ledger. A ledger that refuses (not a
-- stream, or not on this node) disarms the sales it would have told, and
-- each expiry goes to its sale's own stream instead, as tell does.
local function tell_batch(batch)
  local fields = batch.fields
  if #fields == 2 then
    return
  end
  batch.fields = { '*', 'expired' }
  if type(redis.pcall('XADD', batch.ledger, '*', unpack(fields))) == 'string' then
    return
  end
  for i = 3, #fields, 4 do
    local sale = fields[i]
    -- Before its expiry goes to the stream, which the group must not pass.
    disarm(sale, '$')
    redis.call('XADD', string.sub(sale, 1, -6) .. ':orders', '*', 'expired', fields[i + 1],
      fields[i + 2], fields[i + 3])
  end
end

-- Gathers the expiry of order `ref` of sale hash `key` in `batch` when the
-- sale is armed with the batch's ledger (`n`: its field as read); answers
-- whether it did.
local function gather(batch, n, key, gen, ref, value)
  if not (batch and n and string.find(n, batch.armed, 1, true) == 1) then
    return false
  end
  local fields = batch.fields
  local i = #fields
  fields[i + 1], fields[i + 2], fields[i + 3], fields[i + 4] = key, gen, ref, value
  if i + 4 >= BATCH_MOST then
    tell_batch(batch)
  end
  return true
end

-- expire_order(key, ref, gen, qty, user, cluster, batch): expires the
-- order a due index member names, "<sale hash key> <ref> <gen> <qty>
-- <user>" (as expire_due.lua splits it), which the persisters file for a
-- purchase told through the ledger (crates/orders/src/ledger.rs): a quiet
-- sale's order, expired with no look at the sale's stream. Its member
-- leaves the index whatever happens; the cursor `swept` stays where it is
-- (the sale's next walk passes over what is settled), so a purchase filed
-- under the sale's own key, or one whose member was lost with a master, is
-- still found. KEYS: set here, on a cluster only. Returns 1 if it expired,
-- 0 if it was settled already or of a sale no longer there, nil if the
-- sale's keys may be moving away (see moving: left to the caller, whose
-- call declares them). Its expiry is told in `batch` (gather; the caller
-- adds it), else as record does (lifecycle_common.lua).
-- Cost: (+EXISTS on a cluster) HMGET; to expire HSETNX, HINCRBY of `left`
-- (+HINCRBY of the buyer's count with a limit, +PUBLISH when none were
-- left), and a share of the batch's XADD (else tell's, or an XADD); no
-- stream read, and nothing parsed but the member. It gives the units back
-- as settle does, not through it: settle's read of `left`, its number
-- formatting and its tables cost this path ~19 % more (callgrind,
-- lua-cost.sh's sweep case). It names the sale's stream only when the
-- expiry is not told: building KEYS and that name for every order cost
-- ~4,000 instructions an order (lua-cost.sh: 76,276 to 72,272 with the
-- member split in one match).
local function expire_order(key, ref, gen, qty, user, cluster, batch)
  local base = string.sub(key, 1, -6)
  -- The keys as a table only for the look on a cluster, and the stream's
  -- name only for an expiry not told: each costs every order of a sweep.
  if cluster then
    KEYS = { key, base .. ':orders', base .. ':settled' }
    if moving(cluster) then
      return nil
    end
  end
  local m = redis.call('HMGET', key, 'gen', 'limit', 'n')
  if m[1] ~= gen then
    return 0
  end
  local value = user .. '|' .. qty
  if redis.call('HSETNX', base .. ':settled', ref, 'expired|' .. value) == 0 then
    return 0
  end
  if m[2] and m[2] ~= '0' then
    redis.call('HINCRBY', key, 'u:' .. user, '-' .. qty)
  end
  if redis.call('HINCRBY', key, 'left', qty) <= tonumber(qty) then
    redis.call('PUBLISH', 'seckill:restock', string.sub(key, 15, -7))
  end
  if gather(batch, m[3], key, gen, ref, value) then
    return 1
  end
  local event = { 'expired', gen, ref, value }
  if not tell(m[3], key, nil, nil, unpack(event)) then
    redis.call('XADD', base .. ':orders', '*', unpack(event))
  end
  return 1
end
