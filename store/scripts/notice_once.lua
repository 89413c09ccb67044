-- notice_once: queue a channel line for a job once (the line when every
-- pipeline avoids a queued job's site, doc/pipeline-api.md, The take rule):
-- the marker and the notice in one step; and at most one line per site
-- and period (a stranger who queues many jobs on a site the pipelines
-- avoid gets one line, not one per job).
--
-- KEYS[1] the marker (archivebot:all_avoid:IDENT)
-- KEYS[2] archivebot:admin_notices
-- KEYS[3] the site's marker (archivebot:all_avoid_site:RULE)
-- ARGV[1] the marker's TTL (seconds)   ARGV[2] the notice (JSON)
-- ARGV[3] the site's period (seconds; 0: no bound per site)
-- Returns 1 queued now; 0 queued before (nothing written); 2 the site's
-- line of this period covers it (the job's marker is written, no line).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local period = tonumber(ARGV[3]) or 0
if period > 0 and not redis.call('SET', KEYS[3], ARGV[2], 'NX', 'EX', period) then
  redis.call('SET', KEYS[1], '1', 'EX', ARGV[1])
  return 2
end
redis.call('SET', KEYS[1], '1', 'EX', ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1
