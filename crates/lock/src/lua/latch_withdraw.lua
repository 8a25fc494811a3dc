-- ARGV: token. A waiter gives up. Returns 1.
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
