-- Observe mode's question for one lock key (lockmgr.Observer): who is in
-- the way of an owner that would take it, found without taking or waiting
-- for anything. Used by redislock and by redlock on each of its servers.
-- KEYS[1] lock hash (its 'own' field: the holder's owner id) or string; KEYS[2] the
-- key's notes: hash owner id -> 'reg:exp', when the owner first noted the
-- key (server time, µs) and when its note ends (ms). ARGV: 1 owner id,
-- 2 note ttl ms. Notes the owner's; drops notes past their end.
-- Returns {holder or '', earlier note's owner, ...}: the lock's holder
-- (other than the owner) and the owners of the notes made before the
-- owner's first one, oldest first.
local lock, notes = KEYS[1], KEYS[2]
local own, ttl = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ms = math.floor(us / 1000)

local holder = redis.pcall('HGET', lock, 'own')
if type(holder) == 'table' then
  -- redislock's fast-path holder: the string #tok ':' tok #own ':' own ...
  local v = redis.call('GET', lock)
  local d = string.match(v, '^(%d+):')
  local at = #d + 2 + tonumber(d)
  local d2 = string.match(v, '^(%d+):', at)
  holder = string.sub(v, at + #d2 + 1, at + #d2 + tonumber(d2))
end
if not holder or holder == own then holder = '' end

local mine = us
local live = {}
local all = redis.call('HGETALL', notes)
for i = 1, #all, 2 do
  local reg, exp = string.match(all[i + 1], '^(%d+):(%d+)$')
  reg, exp = tonumber(reg), tonumber(exp)
  if not reg or exp <= ms then
    redis.call('HDEL', notes, all[i])
  elseif all[i] == own then
    mine = reg
  else
    live[#live + 1] = {all[i], reg}
  end
end
redis.call('HSET', notes, own, string.format('%.0f:%.0f', mine, ms + ttl))
redis.call('PEXPIRE', notes, ttl)

table.sort(live, function(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[1] < b[1]
end)
local out = {holder}
for _, n in ipairs(live) do
  if n[2] < mine or (n[2] == mine and n[1] < own) then
    if n[1] ~= holder then out[#out + 1] = n[1] end
  end
end
return out
