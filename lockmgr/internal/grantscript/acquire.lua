-- Grant one lock key, queue a waiter, or wound a younger holder. Used by
-- redislock (one Redis deployment) and by redlock on each of its servers.
-- KEYS[1] lock hash {tok, own, prio, ch, f, wounded}; KEYS[2] wait queue
-- (ZSET tok -> owner priority, ties by tok bytes); KEYS[3] ticket expiry
-- (ZSET tok -> ms); KEYS[4] fence counter; KEYS[5], optional, the grants
-- hash (tok -> #own ':' own ch): a ticket queued with an entry there may be
-- granted the key by the release that frees it (redislock's release.lua).
-- ARGV: 1 tok, 2 owner id, 3 owner priority (µs), 4 ttl ms, 5 ticket ttl ms,
-- 6 the requesting Locker's wound channel ('' for none: the hash then has
-- no ch and a wound is only the wounded flag, with no PUBLISH; with one,
-- a wound publishes the holder's ticket on it, and a waiter newly queued
-- behind a holder it does not wound publishes NUL .. that ticket), 7 "1" to
-- queue if not granted, 8 fence counter ttl ms, 9 the ticket of the
-- requesting Locker's next local waiter ('' if none), queued with it when
-- this request is granted so that instance keeps its place, 10 that
-- waiter's owner priority, 11 its owner id, 12 "1" if the requesting
-- Locker hears the key's grant announcements (with KEYS[5]: only then do
-- the tickets it queues get grants entries). A ticket queued with a grants
-- entry also records its next local waiter (ARGV 9-11) under the field
-- '>' .. ticket (#next ':' next prio ':' owner), so that a release which
-- grants it the key queues that waiter too, as a grant here does.
-- Returns {1, fence, pttl} granted (also when already ours), {0, 0, pttl,
-- holder's owner, queued, rank, mark} held by another, {2, 0, 0, '',
-- queued, rank, mark} free but an older waiter goes first; queued is the
-- wait queue's length, rank tok's 0-based place in it (nil if not queued)
-- and mark the larger of the fence counter and the server's time in µs: a
-- grant this server makes later has a fence above it (and, as long as the
-- servers' clocks agree to within a failover's time, so does one made by a
-- server that replaces it).
local lock, q, qx, fence, qg = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local tok, own, prio = ARGV[1], ARGV[2], tonumber(ARGV[3])

-- bytewise (owner priority, id) order, the same as lockmgr.Owner.Older
local function older(p1, s1, p2, s2)
  if p1 ~= p2 then return p1 < p2 end
  for i = 1, math.min(#s1, #s2) do
    local a, b = string.byte(s1, i), string.byte(s2, i)
    if a ~= b then return a < b end
  end
  return #s1 < #s2
end

-- The uncontended path: nobody holds the key and nobody waits for it
-- (the queue and its ticket expiry and grants entries exist only while
-- someone does), and no next local waiter is to be queued. Take it with
-- owner, fence and lease, and note nothing else. The fence is the same
-- max(counter + 1, server time in µs) as below, read and written in one
-- SET ... GET (a second SET only when the clock is behind the counter).
if ARGV[9] == '' and redis.call('EXISTS', lock, q) == 0 then
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local fs = string.format('%.0f', us)
  local prev = tonumber(redis.call('SET', fence, fs, 'PX', ARGV[8], 'GET') or '0')
  if prev >= us then
    fs = string.format('%.0f', prev + 1)
    redis.call('SET', fence, fs, 'PX', ARGV[8])
  end
  if ARGV[6] ~= '' then
    redis.call('HSET', lock, 'tok', tok, 'own', own, 'prio', ARGV[3], 'ch', ARGV[6], 'f', fs)
  else
    redis.call('HSET', lock, 'tok', tok, 'own', own, 'prio', ARGV[3], 'f', fs)
  end
  redis.call('PEXPIRE', lock, ARGV[4])
  return {1, tonumber(fs), tonumber(ARGV[4])}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = redis.call('ZRANGEBYSCORE', qx, '-inf', now, 'LIMIT', 0, 64)
if #stale > 0 then
  redis.call('ZREM', q, unpack(stale))
  redis.call('ZREM', qx, unpack(stale))
  if qg then
    redis.call('HDEL', qg, unpack(stale))
    for i = 1, #stale do redis.call('HDEL', qg, '>' .. stale[i]) end
  end
end

-- queue (or refresh) ticket tk of owner ow with priority p; nx: only if
-- not queued yet. Returns 1 if tk was not queued before.
local function enqueue(tk, p, ow, nx)
  local added
  if nx then
    added = redis.call('ZADD', q, 'NX', p, tk)
  else
    added = redis.call('ZADD', q, p, tk)
  end
  redis.call('ZADD', qx, now + tonumber(ARGV[5]), tk)
  if qg and ARGV[12] == '1' then
    redis.call('HSET', qg, tk, #ow .. ':' .. ow .. ARGV[6])
    if not nx and ARGV[9] ~= '' and ARGV[9] ~= tk then
      redis.call('HSET', qg, '>' .. tk, #ARGV[9] .. ':' .. ARGV[9] .. ARGV[10] .. ':' .. (ARGV[11] or ''))
    else
      redis.call('HDEL', qg, '>' .. tk)
    end
    redis.call('PEXPIRE', qg, ARGV[5])
  elseif qg then
    redis.call('HDEL', qg, tk, '>' .. tk)
  end
  return added
end

local function counter()
  return tonumber(redis.call('GET', fence) or '0')
end

local function mark()
  return math.max(counter(), tonumber(t[1]) * 1000000 + tonumber(t[2]))
end

-- A fast-path holder (redislock: SET NX PX of the string #tok ':' tok
-- #own ':' own prio ':' fence ':' ch, no script) is made the hash the
-- rest reads, with the lease it has left, and its fence carried into the
-- counter, so the queue, wound-wait and grants below work as for any
-- holder and fences keep growing.
local h = redis.pcall('HMGET', lock, 'tok', 'own', 'prio', 'ch', 'f')
if h['err'] then
  local ftok, fown, fprio, fch, ff = fastToHash(lock)
  if counter() < tonumber(ff) then redis.call('SET', fence, ff, 'PX', ARGV[8]) end
  h = {ftok, fown, fprio, fch, ff}
end
if h[1] == tok then
  return {1, tonumber(h[5]), redis.call('PTTL', lock)}
end

if not h[1] then
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  if head[1] == nil or head[1] == tok or prio < tonumber(head[2])
      or (prio == tonumber(head[2]) and older(prio, tok, prio, head[1])) then
    redis.call('ZREM', q, tok)
    redis.call('ZREM', qx, tok)
    if qg then redis.call('HDEL', qg, tok, '>' .. tok) end
    local f = counter() + 1
    local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if f < us then f = us end
    local fs = string.format('%.0f', f)
    redis.call('SET', fence, fs, 'PX', ARGV[8])
    if ARGV[6] ~= '' then
      redis.call('HSET', lock, 'tok', tok, 'own', own, 'prio', ARGV[3], 'ch', ARGV[6], 'f', fs)
    else
      redis.call('HSET', lock, 'tok', tok, 'own', own, 'prio', ARGV[3], 'f', fs)
    end
    redis.call('PEXPIRE', lock, ARGV[4])
    if ARGV[9] ~= '' and ARGV[9] ~= tok then
      enqueue(ARGV[9], tonumber(ARGV[10]), ARGV[11] or '', true)
    end
    return {1, f, tonumber(ARGV[4])}
  end
  if ARGV[7] == '1' then enqueue(tok, prio, own, false) end
  return {2, 0, 0, '', redis.call('ZCARD', q), redis.call('ZRANK', q, tok), mark()}
end

local fresh = ARGV[7] == '1' and enqueue(tok, prio, own, false) == 1
if h[2] ~= own and older(prio, own, tonumber(h[3]), h[2]) then
  redis.call('HSET', lock, 'wounded', '1')
  if h[4] then redis.call('PUBLISH', h[4], h[1]) end
elseif fresh and h[4] and h[2] ~= own then
  -- A new waiter the holder does not yield to: tell the holder's Locker
  -- (NUL, then the holder's ticket) that someone waits, so it sends
  -- the release at once instead of holding it for a ride (redislock's
  -- release window).
  redis.call('PUBLISH', h[4], '\0' .. h[1])
end
return {0, 0, redis.call('PTTL', lock), h[2], redis.call('ZCARD', q), redis.call('ZRANK', q, tok), mark()}
