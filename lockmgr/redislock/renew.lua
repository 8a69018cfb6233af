-- Extend a held lock key if it is still ours; restore it if the server lost
-- it (restart without persistence, failover) while our lease is still valid.
-- The function renew does it for one key with its KEYS and ARGV (below);
-- scripts.go ends the script with a call of it, or, for the keys of one
-- lease at once, with renew_many.lua's loop.
-- KEYS[1] lock hash. ARGV: 1 tok, 2 ttl ms, 3 "1" if the holder's lease is
-- still valid on its own clock (restore allowed), 4 owner id, 5 owner
-- priority, 6 holder Locker's wound channel, 7 fence.
-- The lock may be the string a fast-path holder set (#tok ':' tok ...,
-- see release.lua): nobody has asked for the key since, so it is not
-- wounded.
-- Returns 0 not ours (lost), 1 renewed, 2 renewed but wounded by an older
-- waiter (wound-wait), 3 restored.
local function renew(KEYS, ARGV)
  local h = redis.pcall('HMGET', KEYS[1], 'tok', 'wounded')
  if h['err'] then
    local pfx = #ARGV[1] .. ':' .. ARGV[1]
    if string.sub(redis.call('GET', KEYS[1]), 1, #pfx) ~= pfx then return 0 end
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
  end
  if not h[1] and ARGV[3] == '1' then
    redis.call('HSET', KEYS[1], 'tok', ARGV[1], 'own', ARGV[4], 'prio', ARGV[5], 'ch', ARGV[6], 'f', ARGV[7])
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 3
  end
  if h[1] ~= ARGV[1] then return 0 end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if h[2] then return 2 end
  return 1
end
