-- Keep a lock for another turn of the instance that holds it: after its
-- bounds on local hand-offs (Options.LocalHandoffs, LocalHandoffWindow),
-- a lease that nobody else has asked Redis for is extended instead of
-- given back and taken again.
-- KEYS: 1 lock, 2 wait queue. ARGV: 1 tok, 2 ttl ms.
-- Only the string a fast-path holder set (see release.lua) with no queue
-- for the key is kept: anyone who asked for the key since turned it into
-- the hash or queued a ticket, and then the holder gives it back as usual
-- so that the oldest waiter of any instance gets it.
-- Returns 1 kept (the ttl starts again), 0 not ours or asked for.
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' then return 0 end
local pfx = #ARGV[1] .. ':' .. ARGV[1]
if string.sub(v, 1, #pfx) ~= pfx then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
