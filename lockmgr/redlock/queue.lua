-- Queue or refresh a waiter's ticket on this server without trying.
-- KEYS[1] wait queue, KEYS[2] ticket expiry. ARGV: 1 tok, 2 owner
-- priority, 3 ticket ttl ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
return 1
