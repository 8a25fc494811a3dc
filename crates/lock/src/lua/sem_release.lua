-- ARGV: permit ("<token>:<i>"), the caller's number of permits. Returns
-- 1 when it was held, 0 when its lease had ended: give's answer
-- (sem_common.lua).
return give(ARGV[1], ARGV[2], now_ms())
