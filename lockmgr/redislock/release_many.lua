-- Give several lock keys of one token back in one call: release (above)
-- for each, in order. KEYS: each key's five KEYS of release, one key after
-- another. ARGV: 1 tok, 2 the lease to grant a next waiter ('' : grant
-- nothing), 3 fence counter ttl ms, 4 ticket ttl ms, 5 n, 6 .. 5+n the
-- tickets handed off inside the instance (release's ARGV 11...), then,
-- per key, six: its wake-up channel, 's' or '', and its releasing
-- Locker's local head waiter's ticket, owner priority, owner id and wound
-- channel (release's ARGV 2 and 6-10).
-- Returns one reply of release per key, in order; a key whose release
-- failed (a lock key of another type) gets its error there, as its own
-- call would, and the keys after it are released still.
local tok, lease, fenceTTL, ticketTTL, n = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local at = 6 + n
local out = {}
for k = 0, #KEYS / 5 - 1 do
  local b, j = k * 5, at + k * 6
  local argv = {tok, ARGV[j], lease, fenceTTL, ticketTTL, ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4], ARGV[j + 5]}
  for i = 6, 5 + n do argv[#argv + 1] = ARGV[i] end
  local ok, r = pcall(release, {KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], KEYS[b + 4], KEYS[b + 5]}, argv)
  if ok or type(r) == 'table' then
    out[k + 1] = r -- a reply, or redis.call's error
  else
    out[k + 1] = redis.error_reply(tostring(r))
  end
end
return out
