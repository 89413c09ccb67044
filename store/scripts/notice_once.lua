-- notice_once: queue a channel line for a job once (the line when every
-- pipeline avoids a queued job's site, doc/pipeline-api.md, The take rule):
-- the marker and the notice in one step.
--
-- KEYS[1] the marker (archivebot:all_avoid:IDENT)
-- KEYS[2] archivebot:admin_notices
-- ARGV[1] the marker's TTL (seconds)   ARGV[2] the notice (JSON)
-- Returns 1 queued now; 0 queued before (nothing written).
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  return 1
end
return 0
