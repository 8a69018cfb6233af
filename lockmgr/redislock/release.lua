-- Give a lock key back (compare-and-delete) and leave its wait queue.
-- The function release does it for one key, with that key's KEYS and
-- ARGV (below); scripts.go ends the script with a call of it for the
-- script's own KEYS and ARGV, or, for several keys at once, with
-- release_many.lua's loop.
-- Idempotent: a retried or stale release deletes nothing of anyone else.
-- KEYS as the acquire script's: 1 lock (a hash, or the string a fast-path
-- holder set, see below), 2 wait queue, 3 ticket expiry, 4 fence counter,
-- 5 grants hash (tok -> #own ':' own ch).
-- ARGV: 1 tok, 2 the key's wake-up channel, 3 the lease (ms) to grant the
-- next waiter ('' : grant nothing, only wake), 4 fence counter ttl ms,
-- 5 ticket ttl ms, 6 's' if the key was most likely taken by the fast
-- path (a string: look for it first), 7 the ticket of the releasing
-- Locker's local head waiter for the key ('' for none), 8 its owner
-- priority, 9 its owner id, 10 that Locker's wound channel when it hears
-- the key's announcements ('' : the ticket gets no grants entry), 11...
-- tickets of waiters the lease was handed to inside its instance, taken
-- off the queue too.
-- A fast-path holder's lock is the string #tok ':' tok #own ':' own prio
-- ':' fence ':' ch, set by SET NX PX without a script; the acquire script
-- turns it into the hash as soon as anyone else asks for the key, so a
-- string lock has nobody queued behind it (but see below).
-- When the lock became free for its waiters: if the oldest live ticket has
-- a grants entry, the lock is granted to it here, as the acquire script
-- would grant it, for the lease ARGV[3] (short: its holder renews it), and
-- 'g' .. fence .. ' ' .. its ticket is published on the wake-up channel;
-- otherwise 'r' is published, once, and the waiters ask; the lock is then
-- left reserved (a hash without holder, ticket ttl) so that a fast-path
-- SET NX cannot take the key ahead of them. A grant also queues the next
-- local waiter the ticket's acquire recorded ('>' field, see acquire.lua),
-- with its own priority, so its instance keeps its place among the
-- others' waiters as when the acquire script grants. The same holds for
-- the releasing instance: a release that frees the key while waiters are
-- queued queues the ticket of its local head waiter (ARGV 7-10) before it
-- picks whom to grant, as that waiter would queue itself when it asks.
-- Without it, a waiter that waited in process behind its own instance's
-- lease, or became its instance's head while the key passed through
-- other instances (its ticket not yet asked for), could find younger
-- waiters of another instance queued, and granted, ahead of it.
-- Returns {deleted}, deleted 1 if the lock was ours and is now deleted,
-- else 0; with {deleted, ticket, fence} when it granted the key.
local function release(KEYS, ARGV)
  local lock, q, qx, fence, qg, tok = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1]
  local pfx = #tok .. ':' .. tok
  -- ours reports whether the fast-path lock string v is tok's
  local function ours(v) return string.sub(v, 1, #pfx) == pfx end
  -- plain: no handed-off tickets to take off the queue. A local head
  -- (ARGV 7) does not count: it is queued below only when others are.
  local plain = #ARGV < 11
  -- The fast path's release: compare-and-delete the string (GET, DEL).
  local v = false
  if ARGV[6] == 's' then
    v = redis.pcall('GET', lock)
    if plain and type(v) == 'string' then
      if not ours(v) then return {0} end
      redis.call('DEL', lock)
      return {1}
    end
  end
  -- The uncontended path of a hash lock: nobody waits for the key (no
  -- queue, so no ticket expiry or grants entry either) and no handed-off
  -- waiter's ticket is to be removed: compare-and-delete, nothing to
  -- announce.
  if plain and redis.call('EXISTS', q) == 0 then
    local t = redis.pcall('HGET', lock, 'tok')
    if type(t) == 'table' then -- a string: a fast-path holder's
      if not ours(redis.call('GET', lock)) then return {0} end
    elseif t ~= tok then
      return {0}
    end
    redis.call('DEL', lock)
    return {1}
  end
  if redis.call('TYPE', lock)['ok'] == 'string' then
    fastToHash(lock) -- a fast-path holder with waiters: the hash the rest reads
  end
  local wasHead = redis.call('ZRANK', q, tok) == 0
  local gone = {tok}
  for i = 11, #ARGV do gone[#gone + 1] = ARGV[i] end
  redis.call('ZREM', q, unpack(gone))
  redis.call('ZREM', qx, unpack(gone))
  redis.call('HDEL', qg, unpack(gone))
  for i = 1, #gone do redis.call('HDEL', qg, '>' .. gone[i]) end
  local deleted = 0
  if redis.call('HGET', lock, 'tok') == tok then
    redis.call('DEL', lock)
    deleted = 1
  end
  local free = deleted == 1 or not redis.call('HGET', lock, 'tok')
  if free and ARGV[7] ~= '' and ARGV[7] ~= tok and redis.call('EXISTS', q) == 1 and not redis.call('ZSCORE', q, ARGV[7]) then
    -- the releasing instance's local head keeps its place by age among the
    -- waiters queued (with none queued, it takes the key when it asks)
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('ZADD', q, ARGV[8], ARGV[7])
    redis.call('ZADD', qx, now + tonumber(ARGV[5]), ARGV[7])
    if ARGV[10] ~= '' then
      redis.call('HSET', qg, ARGV[7], #ARGV[9] .. ':' .. ARGV[9] .. ARGV[10])
      redis.call('PEXPIRE', qg, ARGV[5])
    end
  end
  if redis.call('ZCARD', q) == 0 then
    -- nobody waits any more: a reservation is not needed
    if free and redis.call('EXISTS', lock) == 1 then redis.call('DEL', lock) end
    return {deleted}
  end
  if not (deleted == 1 or (wasHead and free)) then
    return {deleted}
  end
  if ARGV[3] ~= '' then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local stale = redis.call('ZRANGEBYSCORE', qx, '-inf', now, 'LIMIT', 0, 64)
    if #stale > 0 then
      redis.call('ZREM', q, unpack(stale))
      redis.call('ZREM', qx, unpack(stale))
      redis.call('HDEL', qg, unpack(stale))
      for i = 1, #stale do redis.call('HDEL', qg, '>' .. stale[i]) end
    end
    local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    local info = head[1] and redis.call('HGET', qg, head[1])
    local digits = info and string.match(info, '^(%d+):')
    if digits then
      local n, at = tonumber(digits), #digits + 2
      local own, ch = string.sub(info, at, at + n - 1), string.sub(info, at + n)
      local f = tonumber(redis.call('GET', fence) or '0') + 1
      local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
      if f < us then f = us end
      local fs = string.format('%.0f', f)
      redis.call('SET', fence, fs, 'PX', ARGV[4])
      local prio = string.format('%.0f', tonumber(head[2]))
      if ch ~= '' then
        redis.call('HSET', lock, 'tok', head[1], 'own', own, 'prio', prio, 'ch', ch, 'f', fs)
      else
        redis.call('HSET', lock, 'tok', head[1], 'own', own, 'prio', prio, 'f', fs)
      end
      redis.call('PEXPIRE', lock, ARGV[3])
      redis.call('ZREM', q, head[1])
      redis.call('ZREM', qx, head[1])
      local nxt = redis.call('HGET', qg, '>' .. head[1])
      redis.call('HDEL', qg, head[1], '>' .. head[1])
      local nd = nxt and string.match(nxt, '^(%d+):')
      if nd then
        local m, nat = tonumber(nd), #nd + 2
        local ntok = string.sub(nxt, nat, nat + m - 1)
        local np, nown = string.match(string.sub(nxt, nat + m), '^([%d%.eE+-]+):(.*)$')
        if np and ntok ~= '' and not redis.call('ZSCORE', q, ntok) then
          redis.call('ZADD', q, 'NX', np, ntok)
          redis.call('ZADD', qx, now + tonumber(ARGV[3]), ntok)
          redis.call('HSET', qg, ntok, #nown .. ':' .. nown .. ch)
        end
      end
      redis.call('PUBLISH', ARGV[2], 'g' .. fs .. ' ' .. head[1])
      return {deleted, head[1], fs}
    end
    if not head[1] then return {deleted} end
  end
  -- the key is free and nobody was granted it: reserve it for the waiters,
  -- who ask now, so that no fast-path SET NX takes it ahead of them
  redis.call('HSET', lock, 'r', '1')
  redis.call('PEXPIRE', lock, ARGV[5])
  redis.call('PUBLISH', ARGV[2], 'r')
  return {deleted}
end
