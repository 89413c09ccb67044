-- lease_release: give the leader lease up at a clean shutdown, so that a
-- standby takes over at once (compare and delete).
--
-- KEYS[1] archivebot:leader
-- ARGV[1] the value this node took
-- Returns 1 when released, 0 when it was not ours any more.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
