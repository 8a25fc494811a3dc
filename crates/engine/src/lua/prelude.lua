-- Library-level constants and helpers of the engine's functions, built once when the
-- library loads (only Lua's operators exist then: Redis offers no globals
-- but `redis` at load time).
--
-- ORDER_SUFFIX[i] is "-<i>|", the middle of an order reference
-- "<entry>-<i>|<qty>", for the first 256 orders of a batch (the default
-- batch size; later ones write theirs). Looking it up instead of writing
-- the number saves a batched purchase ~1,900 instructions, as Lua writes
-- numbers with sprintf. It is not bigger because every table here costs
-- every call of every function: Redis steps Lua's garbage collector every
-- 50 calls, and each step marks the whole library. Measured with
-- `scripts/lua-cost.sh`: 256 entries cost an atomic purchase ~1,600
-- instructions, 1,000 entries ~5,100.
local ORDER_SUFFIX = {}
for i = 0, 255 do
  ORDER_SUFFIX[i] = '-' .. i .. '|'
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

-- Tells the persisters that sale hash `sale`'s stream has something new.
-- A persister that has read the stream to its end arms the sale: it writes
-- the name of its master's news set into the hash's field `n` (a key of
-- this node, by a tag chosen for it: crates/orders/src/news.rs) and
-- deletes the field `q`. Whatever then appends to the stream (a purchase,
-- a settlement) and finds the sale armed (`q` absent, `n` set) calls this
-- and disarms the sale: it writes `q` with the other fields it writes
-- anyway, so the calls after it until the next read pay nothing but
-- reading `q`. A lone purchase (purchase.lua) reads nothing for it: it
-- learns from HSET's count of new fields whether `q` was absent; a batch
-- (purchase_batch.lua) and a settlement read `q` with the fields they read
-- anyway (see armed). A pcall, because a set left on another node (the
-- sale's slot moved) must not fail a purchase: the persisters' slow full
-- read finds the sale then.
local function join_news(news, sale)
  redis.pcall('SADD', news, sale)
end

-- The news set to tell, from a sale hash's fields `n` and `q` as read
-- (false when absent): the set if the sale is armed, else false.
local function armed(n, q)
  return (not q) and n
end
