-- ARGV: user, quantity, request id ('' for none). Returns one answer.
local s = load_sale()
if not s then
  return 'no_sale'
end
local answer = buy(s, ARGV[1], tonumber(ARGV[2]), ARGV[3])
finish(s)
return answer
