-- lease_acquire: take the leader lease if nobody holds it (SET NX PX with
-- a fresh fencing token; see doc/protocol.md, Leader lease).
--
-- KEYS[1] archivebot:leader (string)  KEYS[2] archivebot:leader:token (counter)
-- ARGV[1] node id (no spaces)  ARGV[2] lifetime in ms  ARGV[3] now, UNIX ms
-- Returns {1, value} when this call took the lease, {0, value} with the
-- holder's value otherwise. value = "TOKEN NODE ACQUIRED_MS"; TOKEN comes
-- from INCR on KEYS[2], so every term has a new, larger one.
for _, k in ipairs(KEYS) do
  local bad = expect(k, 'string')
  if bad then
    return bad
  end
end
local cur = redis.call('GET', KEYS[1])
if cur then
  return {0, cur}
end
local token = redis.call('INCR', KEYS[2])
local value = token .. ' ' .. ARGV[1] .. ' ' .. ARGV[3]
redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2])
return {1, value}
