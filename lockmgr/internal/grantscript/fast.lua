-- fastToHash turns a fast-path holder's lock, the string #tok ':' tok
-- #own ':' own prio ':' fence ':' ch that redislock sets with SET NX PX
-- and no script, into the hash the scripts read {tok, own, prio, f, ch},
-- keeping the lease it has left. It returns the holder's tok, own, prio,
-- ch (false when it has none) and fence. Prepended to acquire.lua and to
-- redislock's release script (FastForm).
local function fastToHash(lock)
  local s = redis.call('GET', lock)
  local d = string.match(s, '^(%d+):')
  local at = #d + 2 + tonumber(d)
  local ftok = string.sub(s, #d + 2, at - 1)
  local d2 = string.match(s, '^(%d+):', at)
  local at2 = at + #d2 + 1
  local fown = string.sub(s, at2, at2 + tonumber(d2) - 1)
  local fprio, ff, fch = string.match(string.sub(s, at2 + tonumber(d2)), '^([^:]*):(%d+):(.*)$')
  local pttl = redis.call('PTTL', lock)
  redis.call('DEL', lock)
  redis.call('HSET', lock, 'tok', ftok, 'own', fown, 'prio', fprio, 'f', ff)
  if fch ~= '' then redis.call('HSET', lock, 'ch', fch) end
  if pttl > 0 then redis.call('PEXPIRE', lock, pttl) end
  return ftok, fown, fprio, fch ~= '' and fch or false, ff
end

