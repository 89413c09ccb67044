-- abort: abort a job in one atomic step.
--
-- A job still in a queue is taken out of it and finished as aborted at
-- once, doing what a pipeline's abort + mark-done would (doc/protocol.md,
-- What a pipeline does, steps 5–6). A running job gets abort_requested and a settings change, and its
-- pipeline finishes it (upstream behaviour).
--
-- KEYS[1] job hash  KEYS[2] log  KEYS[3] ignore set  KEYS[4] job channel
-- KEYS[5] jobs_aborted  KEYS[6] finish_notifications  KEYS[7] updates
-- KEYS[8] archivebot:history:IDENT   KEYS[9] archivebot:origin:IDENT
-- KEYS[10..] every queue the job may wait in, each followed by its
--            archivebot:paused:QUEUE list (where its jobs wait while it
--            is paused)
-- ARGV[1] now (UNIX seconds with fraction)   ARGV[2] expiry seconds (5)
-- ARGV[3] history entry when a queued job is aborted, ARGV[4] when the
-- abort is requested from a running job (history.lua, prepended)
-- ARGV[5] TTL in seconds of the history and origin records of a job that
-- ends here
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended):
-- a change made under a recorded command returns its recorded reply.
-- Returns {code, url}: code 0 when the job does not exist, -1 when it has
-- already finished, 1 when the abort was requested from a running job, 2
-- when a queued job was aborted, -3 when the key is not a job (not a hash;
-- nothing written); url is the job's URL (for the reply).
local t = job_type(KEYS[1]) -- a ghost is 'none'
if t ~= 'hash' then
  return t == 'none' and {0, ''} or {-3, ''}
end
local bad = history_bad(KEYS[8])
if bad then
  return bad
end
local url = redis.call('HGET', KEYS[1], 'url') or ''
local st = redis.call('HMGET', KEYS[1], 'finished_at', 'failed')
if st[1] or st[2] == 'true' then
  return {-1, url}
end
local queued = false
for k = 10, #KEYS do
  if redis.call('LREM', KEYS[k], 1, KEYS[1]) > 0 then
    queued = true
    break
  end
end
local age = redis.call('HINCRBY', KEYS[1], 'settings_age', 1)
redis.call('HSET', KEYS[1], 'abort_requested', 'true')
if not queued then
  redis.call('PUBLISH', KEYS[4], age)
  history(KEYS[8], ARGV[4])
  return done({1, url})
end
redis.call('HSET', KEYS[1], 'aborted', 'true', 'finished_at', ARGV[1])
redis.call('INCR', KEYS[5])
local ttl = tonumber(ARGV[2])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
local j = redis.call('HMGET', KEYS[1], 'fetch_depth', 'queued_at', 'started_by', 'started_in', 'url', 'url_file')
local function str(v)
  if v then return cjson.encode(v) end
  return 'null'
end
local queued_at = 'null'
if j[2] and tonumber(j[2]) then queued_at = j[2] end
-- Keys in the order the pipeline writes them (sorted).
local doc = '{"aborted":true,"fetch_depth":' .. str(j[1]) ..
  ',"pipeline_id":null,"queued_at":' .. queued_at ..
  ',"started_by":' .. str(j[3]) .. ',"started_in":' .. str(j[4]) ..
  ',"url":' .. str(j[5]) .. ',"url_file":' .. str(j[6]) .. '}'
redis.call('RPUSH', KEYS[6], doc)
redis.call('PUBLISH', KEYS[7], KEYS[1])
history(KEYS[8], ARGV[3])
redis.call('EXPIRE', KEYS[8], ARGV[5])
redis.call('EXPIRE', KEYS[9], ARGV[5])
return done({2, url})
