-- Extend a held lock key on this server if it is still ours.
-- KEYS[1] lock hash. ARGV: 1 tok, 2 ttl ms.
-- Returns 0 not ours, 1 renewed, 2 renewed but wounded by an older waiter.
local h = redis.call('HMGET', KEYS[1], 'tok', 'wounded')
if h[1] ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if h[2] then return 2 end
return 1
