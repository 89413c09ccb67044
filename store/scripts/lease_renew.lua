-- lease_renew: extend the leader lease if this node still holds it.
--
-- KEYS[1] archivebot:leader
-- ARGV[1] the value this node took  ARGV[2] lifetime in ms
-- Returns 1 when renewed, 0 when the lease expired or another node holds
-- it (the caller steps down).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
