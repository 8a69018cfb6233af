-- Renew all keys of one lease in one call: renew (above) for each, in
-- order. KEYS: the lock keys. ARGV: 1 tok, 2 ttl ms, 3 restore allowed,
-- 4 owner id, 5 owner priority, 6 wound channel (renew's ARGV 1-6), then
-- each key's fence, in order.
-- Returns one reply of renew per key, in order.
local out = {}
for i = 1, #KEYS do
  out[i] = renew({KEYS[i]}, {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[6 + i]})
end
return out
