-- ARGV: user, quantity, request id, repeated. Returns one answer per
-- purchase, in order, each as purchase.lua would have answered it alone.
local answers = {}
local s = load_sale()
for i = 1, #ARGV, 3 do
  if s then
    answers[#answers + 1] = buy(s, ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2])
  else
    answers[#answers + 1] = 'no_sale'
  end
end
if s then
  finish(s)
end
return answers
