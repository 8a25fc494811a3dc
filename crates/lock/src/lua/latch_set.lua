-- ARGV: count, lease ms. Sets the count if the latch has none (it is open
-- or new): 1, else 0 (a count is already running).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', tonumber(ARGV[2])) then
  return 1
end
return 0
