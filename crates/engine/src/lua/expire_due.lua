-- The expire function: expire.lua for one sale, or for every sale one
-- master's due index lists as due, in one call (one function for both, so
-- the library holds their code once: see prelude.lua).
-- One sale: KEYS: its lifecycle keys (lifecycle_common.lua). ARGV: sale id,
--   most stream entries, optionally its master's due index.
-- Due sales: KEYS: 1 the master's due index (crates/orders/src/news.rs),
--   whose members are sale hash keys (expire.lua's expire_sale walks the
--   sale's stream) and single orders of quiet sales (expire_order).
--   ARGV: '', most members, most stream entries per sale, '1' on a cluster
--   (else ''). The sales' keys are not declared (allow-cross-slot-keys); on
--   a cluster a sale whose slot moves is skipped.
-- Returns { orders expired, 1 if more may be due else 0, { sales left to the
-- caller: shards (whose units the refiller must hear of), sales with more
-- due than `most` entries, sales whose slot is moving } }.
-- Cost: TIME and ZRANGEBYSCORE, then per sale expire_sale's and per order
-- expire_order's (each +EXISTS on a cluster), but one XADD per 1,000 to
-- tell the expiries of the orders of sales armed with the master's ledger
-- (expire.lua's batch; the others' are told one by one), and one ZREM for
-- the orders and the sales left with nothing to come due.

-- One sale filed under its own key, its due orders expired by
-- expire_sale; its id added to `left` when it is the caller's to sweep.
local function expire_filed(key, cluster, most, due_index, now, out, left, unfile)
  -- seckill:{sale:<id>}:sale -> seckill:{sale:<id>} and <id>
  local base, id = string.sub(key, 1, -6), string.sub(key, 15, -7)
  -- settle and expire_sale read the sale's keys from KEYS.
  KEYS = { key, base .. ':orders', base .. ':settled' }
  if string.find(id, '~', 1, true) or moving(cluster) then
    left[#left + 1] = id
    return
  end
  local expired, more = expire_sale(id, most, due_index, now, unfile)
  out[1] = out[1] + expired
  if more == 1 then
    left[#left + 1] = id
  end
end

local function expire_due_sales()
  local due_index, most, cluster = KEYS[1], tonumber(ARGV[3]), ARGV[4] == '1'
  local now = now_ms()
  local due = redis.call('ZRANGEBYSCORE', due_index, '-inf', string.format('%d', now),
    'LIMIT', 0, tonumber(ARGV[2]))
  local out, left, unfile = { 0, #due == tonumber(ARGV[2]) and 1 or 0 }, {}, {}
  local batch = new_batch(due_index)
  out[3] = left
  -- The expiries gathered are told after the loop. Redis keeps what a
  -- call wrote before a command in it failed, so a failure must not leave
  -- the expiries gathered so far written and untold: they are told first,
  -- then the error goes on.
  local ok, err = pcall(function()
    for _, key in ipairs(due) do
      if string.find(key, ' ', 1, true) then
        -- One order, "<sale hash key> <ref> <gen> <qty> <user>", split in
        -- one match (each piece made is a string Lua keeps), and out of the
        -- index whatever expire_order finds; one this release cannot read
        -- too.
        local sale, ref, gen, qty, user = string.match(key, '^(%S+) (%S+) (%S+) (%d+) (.*)$')
        local expired = 0
        if sale then
          expired = expire_order(sale, ref, gen, qty, user, cluster, batch)
        end
        if expired then
          out[1] = out[1] + expired
        else
          left[#left + 1] = string.sub(sale, 15, -7)
        end
        unfile[#unfile + 1] = key
      else
        expire_filed(key, cluster, most, due_index, now, out, left, unfile)
      end
    end
  end)
  tell_batch(batch)
  if not ok then
    error(err)
  end
  -- The sales left with nothing to come due, and the orders looked at,
  -- out of the index at once.
  if #unfile > 0 then
    redis.call('ZREM', due_index, unpack(unfile))
  end
  return out
end

if ARGV[1] ~= '' then
  return { expire_sale(ARGV[1], tonumber(ARGV[2]), ARGV[3]) }
end
return expire_due_sales()
