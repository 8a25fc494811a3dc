-- The source articles' check-and-decrement, kept as they wrote it (as the
-- baseline of the `lua` strategy): one unit if any is left.
if (tonumber(redis.call("GET", KEYS[1])) > tonumber(0)) then
  redis.call("DECR", KEYS[1])
  return true
else
  return nil
end
