-- Give a lock key back (compare-and-delete) and leave its wait queue.
-- Idempotent: a retried or stale release deletes nothing of anyone else.
-- KEYS[1] lock hash, KEYS[2] wait queue, KEYS[3] ticket expiry.
-- ARGV: 1 tok, 2 the key's wake-up channel, 3... tickets of waiters the
-- lease was handed to inside its instance, taken off the queue too.
-- Wakes the key's waiters once (PUBLISH) when the lock became free for them.
-- Returns 1 if the lock was ours and is now deleted, else 0.
local lock, q, qx, tok = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local wasHead = redis.call('ZRANK', q, tok) == 0
redis.call('ZREM', q, tok)
redis.call('ZREM', qx, tok)
for i = 3, #ARGV do
  redis.call('ZREM', q, ARGV[i])
  redis.call('ZREM', qx, ARGV[i])
end
local deleted = 0
if redis.call('HGET', lock, 'tok') == tok then
  redis.call('DEL', lock)
  deleted = 1
end
if (deleted == 1 or (wasHead and redis.call('EXISTS', lock) == 0))
    and redis.call('ZCARD', q) > 0 then
  redis.call('PUBLISH', ARGV[2], 'r')
end
return deleted
