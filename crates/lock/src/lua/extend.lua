-- ARGV: token, lease ms. Returns 1 when the holder's lease was reset, else 0.
if not owned(ARGV[1]) then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
