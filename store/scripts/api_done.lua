-- api_done: upstream's MARK_DONE for a held job (doc/pipeline-api.md,
-- Finish a held job), with the finish notice built from the record
-- instead of taken from the pipeline.
--
-- KEYS[1] the job record   KEYS[2] the key's held set   KEYS[3] its log
-- KEYS[4] its ignore set   KEYS[5] working   KEYS[6] jobs_aborted
-- KEYS[7] jobs_completed   KEYS[8] finish_notifications
-- ARGV[1] the key's pipeline record key   ARGV[2] the updates channel
-- ARGV[3] finished_at (integer seconds)   ARGV[4] expiry of a completed job
-- ARGV[5] expiry of an aborted job
-- Returns {1, aborted (0/1)}; {0, why} not held (nothing written).
local why = held_check()
if why then return {0, why} end
for k = 5, 8 do
  local want = (k == 5 or k == 8) and 'list' or 'string'
  if not typed(KEYS[k], want) then
    return redis.error_reply('WRONGTYPE ' .. KEYS[k] .. ' is not a ' .. want)
  end
end
redis.call('HSET', KEYS[1], 'finished_at', ARGV[3])
redis.call('LREM', KEYS[5], 1, KEYS[1])
local f = redis.call('HMGET', KEYS[1], 'aborted', 'fetch_depth', 'queued_at', 'started_by', 'started_in', 'url', 'url_file')
local aborted = f[1] ~= false
local expiry = ARGV[4]
if aborted then
  redis.call('INCR', KEYS[6])
  expiry = ARGV[5]
else
  redis.call('INCR', KEYS[7])
end
redis.call('EXPIRE', KEYS[1], expiry)
redis.call('EXPIRE', KEYS[3], expiry)
redis.call('EXPIRE', KEYS[4], expiry)
local notice = {aborted = aborted, pipeline_id = ARGV[1],
  fetch_depth = f[2] or cjson.null, started_by = f[4] or '', started_in = f[5] or '',
  url = f[6] or ''}
notice.queued_at = (f[3] and tonumber(f[3])) or f[3] or cjson.null
notice.url_file = f[7] or cjson.null -- upstream always sends url_file (null when none)
redis.call('RPUSH', KEYS[8], cjson.encode(notice))
redis.call('SREM', KEYS[2], KEYS[1])
redis.call('PUBLISH', ARGV[2], KEYS[1])
return {1, aborted and 1 or 0}
