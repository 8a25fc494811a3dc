-- Library-level constants and helpers of the engine's functions, built once when the
-- library loads (only Lua's operators exist then: Redis offers no globals
-- but `redis` at load time).
--
-- ORDER_SUFFIX[i] is "-<i>|", the middle of an order reference
-- "<entry>-<i>|<qty>", kept for the first 256 orders of a batch (the
-- default batch size) once a batch has made it (suffix). Looking it up
-- instead of writing the number saves ~3,000 instructions an order, as Lua
-- writes numbers with sprintf. Made when first needed, not at load:
-- every table here costs every call of every function, the lock's too
-- (one Lua state holds every library), as Redis steps Lua's garbage
-- collector every 50 calls and each step marks all of it; 256 entries cost
-- each call ~1,500 instructions, which a service using only the atomic
-- strategy never pays (measured with `scripts/lua-cost.sh`).
local ORDER_SUFFIX = {}
local function suffix(i)
  local s = '-' .. i .. '|'
  if i < 256 then
    ORDER_SUFFIX[i] = s
  end
  return s
end

-- What a sharded sale's transfer step answers before it acts (shard_*.lua;
-- m_gen, m_fence as read from the hash, gen and fence as sent): 'no_sale'
-- for a hash not of this generation, 'fenced' once a refiller with a later
-- fence acted on it; nil to go on.
local function refused(m_gen, m_fence, gen, fence)
  if m_gen ~= gen then
    return 'no_sale'
  end
  if tonumber(fence) < tonumber(m_fence or '0') then
    return 'fenced'
  end
end

-- Disarms sale hash `sale` if it is armed (see tell): whatever its stream
-- holds past its group was told, up to `to`, so the group moves there
-- first ('$': all of it), and what comes after is read from the stream.
-- Cost: HGET, +XGROUP SETID and HDEL when armed.
local function disarm(sale, to)
  local n = redis.call('HGET', sale, 'n')
  local group = n and string.match(n, '^%S+ (%S+) %d+$')
  if not group then
    return
  end
  -- A pcall: a group gone (the stream deleted) has nothing to skip.
  redis.pcall('XGROUP', 'SETID', string.sub(sale, 1, -6) .. ':orders', group, to)
  redis.call('HDEL', sale, 'n')
end

-- The ledger and " <timeout>" of each value of a sale's field `n` that
-- tell met, by that value: one per master's ledger and payment timeout in
-- use, so a few. At most ARMED_MOST are kept, as each entry costs every
-- call of every function a little (see ORDER_SUFFIX); past that, tell
-- reads `n` at each call.
local ARMED, ARMED_COUNT, ARMED_MOST = {}, 0, 32

-- Tells the persisters of an event of sale hash `sale`, whose fields are
-- the rest of the arguments (`...`): of entry `entry` just appended to its
-- stream `stream`, or, with no `entry`, of one the sale's stream need not
-- hold (a settlement: the sale's settled hash keeps the state, and only
-- SQL must learn it). `n` is the hash's field `n` as read (false when
-- absent): a persister that read the stream to its end arms the sale by
-- writing there its master's ledger, the group that reads the sale's
-- stream and the sale's payment timeout (s), as "<ledger> <group>
-- <timeout>" (crates/orders/src/news.rs).
-- An armed sale stays armed: each event is written to the ledger (a
-- stream of the same master, by a tag chosen for it), as
-- { sale, "<entry> <timeout>" or '*' (the ledger entry's own id), event … },
-- so the persisters read the events of all the master's quiet sales from
-- that one warm key, touching none of the sale's. The group's place in the
-- sale's stream stays where the arming read left it: while `n` is there,
-- all the stream holds past it was told (a read of an armed sale skips
-- it: read_news.lua), and whatever disarms the sale moves the group past
-- what it told first (disarm). Moving it at each purchase instead cost
-- that purchase an XGROUP SETID, ~6,300 instructions (lua-cost.sh). A
-- pcall, because a ledger left on another node (the sale's slot moved)
-- must not fail a purchase: the sale is disarmed instead, its group just
-- before the entry, so the persisters' read of every sale on a change of
-- masters (and their slow full read) delivers it and arms the sale on its
-- master. Returns whether the event was told.
-- What `n` names is read once per distinct `n` (ARMED, above): matched
-- at each call, it cost an armed purchase ~4,000 instructions, and a table
-- of the event, unpacked here, ~2,000 more (lua-cost.sh, limit 1, armed:
-- 90,480 to 84,520 with purchase.lua passing its fields, one run).
-- Cost on an armed sale: XADD; else nothing.
local function tell(n, sale, stream, entry, ...)
  if not n then
    return false
  end
  local armed = ARMED[n]
  if not armed then
    local ledger, timeout = string.match(n, '^(%S+) %S+ (%d+)$')
    if not ledger then
      return false
    end
    armed = { ledger, ' ' .. timeout }
    if ARMED_COUNT < ARMED_MOST then
      ARMED[n], ARMED_COUNT = armed, ARMED_COUNT + 1
    end
  end
  local at = entry and entry .. armed[2] or '*'
  local added = redis.pcall('XADD', armed[1], '*', sale, at, ...)
  if type(added) ~= 'string' then
    local before = '$'
    if entry then
      local prior = redis.call('XREVRANGE', stream, '(' .. entry, '-', 'COUNT', 1)[1]
      before = prior and prior[1] or '0-0'
    end
    disarm(sale, before)
    return false
  end
  return true
end
