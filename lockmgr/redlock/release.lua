-- Give a lock key back on this server (compare-and-delete), leave its wait
-- queue unless told to keep the ticket, and raise the fence counter to the
-- fence granted on the majority, so a later grant that meets this server
-- gets a larger one. Idempotent.
-- KEYS[1] lock hash, KEYS[2] wait queue, KEYS[3] ticket expiry, KEYS[4]
-- fence counter. ARGV: 1 tok, 2 fence to raise to (0: none), 3 fence
-- counter ttl ms, 4 "1" to keep the ticket.
-- Returns 1 if the lock was ours and is now deleted, else 0.
local lock, q, qx, fence, tok = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
if ARGV[4] ~= '1' then
  redis.call('ZREM', q, tok)
  redis.call('ZREM', qx, tok)
end
local raise = tonumber(ARGV[2])
if raise > 0 and raise > tonumber(redis.call('GET', fence) or '0') then
  redis.call('SET', fence, ARGV[2], 'PX', ARGV[3])
end
if redis.call('HGET', lock, 'tok') == tok then
  redis.call('DEL', lock)
  return 1
end
return 0
