-- ARGV: floor. Makes every later fence above `floor`: for Redlock, lifts
-- this master to the fence the quorum agreed on, so any later quorum
-- (which overlaps this one) counts past it; for data fenced by a lock whose
-- keys were lost. A floor ahead of the server's clock is kept until the
-- clock passes it (keep_fence, common.lua); one it has passed needs no key,
-- as every later fence is the clock or above.
keep_fence(tonumber(ARGV[1]), now_us())
return 1
