-- ARGV: token. Deletes the lock only if `token` holds it, then hands it on.
-- Returns 1 when released, 0 when the token did not hold it.
-- Cost: 3 calls (GET, DEL, LPOP) with nobody waiting; 8 handing on (+HDEL,
-- TIME, SET … GET, SET, PUBLISH: handoff).
if not owned(ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1])
handoff()
return 1
