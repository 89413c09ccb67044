-- fence: prepended to every service write script (the list is in
-- scripts.go), so that a node that lost the leader lease cannot write,
-- however long it was paused (see doc/architecture.md, High availability).
--
-- KEYS[#KEYS] archivebot:leader
-- ARGV[#ARGV] the lease value this node holds (its fencing token), or ''
--             when the caller is not fenced (single node, standby reads)
-- Both are removed from KEYS and ARGV before the script's own code runs,
-- so its indexes (and a command record's last two ARGV) are unchanged.
-- Refuses with the error reply "FENCED ..." and writes nothing when the
-- lease holds another value or has expired.
local fence_key, fence_value = table.remove(KEYS), table.remove(ARGV)
if fence_value ~= '' and redis.call('GET', fence_key) ~= fence_value then
  return redis.error_reply('FENCED this node no longer holds ' .. fence_key)
end
