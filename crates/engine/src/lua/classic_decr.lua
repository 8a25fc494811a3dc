-- The classic check-and-decrement script (README, "The classic
-- strategies", `lua`), kept as it is usually written: one unit if any is left.
if (tonumber(redis.call("GET", KEYS[1])) > tonumber(0)) then
  redis.call("DECR", KEYS[1])
  return true
else
  return nil
end
