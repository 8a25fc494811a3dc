-- Many purchases in one call (the `coalesced` strategy), each answered
-- exactly as purchase.lua would have answered it alone, in order.
-- KEYS: 1 sale hash  2 order stream.
-- ARGV: purchase.lua's, a purchase being a batch of one: generation, then
--       user, quantity, request id ('' = none) per purchase, then the limit
--       and start ms only for a sale with them (their count is what is left
--       past the triples). The end is read from the sale's hash.
-- Returns { entry id or '' if nothing sold, one answer per purchase }: the
-- order's number i in that entry, the stored "<ms>-<n>-<i>|<qty>" of an
-- earlier purchase by this buyer with this request id, or a refusal as
-- purchase.lua's.
-- Cost: 3 redis.calls per batch whatever its size (HMGET, XADD, HSET; a
-- batch that sells nothing, HMGET, +HSET if it answered a request id), +1
-- TIME with a start or an end, +1 on a sale a persister armed (tell,
-- prelude.lua); per purchase its hash fields and one stream pair.
local gen, last = ARGV[1], #ARGV
local rules = (last - 1) % 3
last = last - rules
local limit = rules > 0 and tonumber(ARGV[last + 1]) or 0
local start = rules > 1 and tonumber(ARGV[last + 2]) or 0
-- Arrays grow through counters: Lua's `#` searches for the end.
-- 'n': whether a persister armed the sale, and how to tell it (see tell,
-- prelude.lua).
local fields, nf = { 'gen', 'left', 'end', 'n' }, 4
for i = 2, last, 3 do
  if limit > 0 then
    nf = nf + 1
    fields[nf] = 'u:' .. ARGV[i]
  end
  if ARGV[i + 2] ~= '' then
    nf = nf + 1
    fields[nf] = 'r:' .. ARGV[i] .. '/' .. ARGV[i + 2]
  end
end
local m = redis.call('HMGET', KEYS[1], unpack(fields))
local answers, na = { '' }, 1
local refusal
local stop = tonumber(m[3] or '0')
if m[1] ~= gen then
  refusal = 'no_sale'
elseif start > 0 or stop > 0 then
  local now = now_ms()
  if stop > 0 and now >= stop then
    refusal = 'ended'
  elseif now < start then
    refusal = 'not_started'
  end
end
local left = tonumber(m[2] or '0')
local bought, known = {}, {}
local event, ne = { 'b', gen }, 2
local sold = {}      -- order number -> quantity, of this batch's orders
local twins = {}     -- answer index -> order number it repeats
local fresh, nfresh = {}, 0 -- request ids this batch bought with
local dirty = {}
local again            -- a record a repeated request id was answered from
local n, k = 0, 5
for i = 2, last, 3 do
  local user, req = ARGV[i], ARGV[i + 2]
  -- What this buyer holds and what this request id bought, as read (the
  -- first read of each counts; later purchases of the batch update them).
  if limit > 0 then
    if bought[user] == nil then
      bought[user] = tonumber(m[k] or '0')
    end
    k = k + 1
  end
  local prior
  if req ~= '' then
    -- From here `req` is its record's field as read above, built once:
    -- "r:<user>/<id>", the buyer's own (see purchase.lua).
    req = fields[k]
    prior = known[req]
    if prior == nil and m[k] then
      prior = m[k]
      known[req] = prior
    end
    k = k + 1
  end
  local answer
  if refusal == 'no_sale' then
    answer = refusal
  elseif prior then
    answer = prior
    if type(prior) == 'string' then
      again = { req, prior }
    elseif type(prior) == 'number' then
      -- Bought earlier in this batch: answered once the entry id is known.
      twins[na + 1] = prior
      answer = false
    end
  elseif refusal then
    answer = refusal
  else
    local qty = ARGV[i + 1] == '1' and 1 or tonumber(ARGV[i + 1])
    if limit > 0 and bought[user] + qty > limit then
      answer = 'limit'
    elseif left < qty then
      answer = 'sold_out'
    else
      left = left - qty
      if limit > 0 then
        bought[user] = bought[user] + qty
        dirty[user] = true
      end
      event[ne + 1] = user
      ne = ne + 2
      if req == '' then
        event[ne] = ARGV[i + 1]
      else
        event[ne] = ARGV[i + 1] .. '|' .. ARGV[i + 2]
        known[req] = n
        nfresh = nfresh + 1
        fresh[nfresh] = req
      end
      sold[n] = ARGV[i + 1]
      answer = n
      n = n + 1
    end
  end
  na = na + 1
  answers[na] = answer
end
if n == 0 then
  -- Nothing sold: a request answered from its record writes it again (see
  -- purchase.lua), so a WAIT after this call covers the order it answers.
  if again then
    redis.call('HSET', KEYS[1], again[1], again[2])
  end
  return answers
end
local entry = redis.call('XADD', KEYS[2], '*', unpack(event))
tell(m[4], KEYS[1], KEYS[2], entry, unpack(event))
answers[1] = entry
for at, number in pairs(twins) do
  answers[at] = entry .. (ORDER_SUFFIX[number] or suffix(number)) .. sold[number]
end
-- Numbers go out through '%d': Redis would write them with '%.17g', which
-- costs several times more.
local writes, nw = { 'left', string.format('%d', left) }, 2
for user in pairs(dirty) do
  writes[nw + 1] = 'u:' .. user
  writes[nw + 2] = string.format('%d', bought[user])
  nw = nw + 2
end
for _, req in ipairs(fresh) do
  local number = known[req]
  writes[nw + 1] = req
  nw = nw + 2
  writes[nw] = entry .. (ORDER_SUFFIX[number] or suffix(number)) .. sold[number]
end
redis.call('HSET', KEYS[1], unpack(writes))
return answers
