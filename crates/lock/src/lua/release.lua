-- ARGV: token. Deletes the lock only if `token` holds it, then hands it on.
-- Returns 1 when released, 0 when the token did not hold it.
-- Cost: give's (common.lua).
return give(ARGV[1])
