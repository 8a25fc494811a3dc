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
