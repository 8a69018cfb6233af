-- Extend a held lock key on this server if it is still ours; restore it if
-- this server lost it (restart without persistence, or a grant that did not
-- land) while our lease is still valid on the majority.
-- KEYS[1] lock hash. ARGV: 1 tok, 2 ttl ms, 3 "1" if the lease is still
-- valid on the holder's clock (restore allowed), 4 owner id, 5 owner
-- priority, 6 fence.
-- Returns 0 not ours, 1 renewed, 2 renewed but wounded by an older
-- waiter, 3 restored.
local h = redis.call('HMGET', KEYS[1], 'tok', 'wounded')
if not h[1] and ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'tok', ARGV[1], 'own', ARGV[4], 'prio', ARGV[5], 'f', ARGV[6])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 3
end
if h[1] ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if h[2] then return 2 end
return 1
