-- tweet_queue: queue "Archiving URL" for a running job, unless the text is
-- already known, in one atomic step so two racing updates cannot queue it
-- twice and an update arriving after the post cannot queue it again.
--
-- KEYS[1] job hash (the ident)   KEYS[2] tweets:queue   KEYS[3] tweets:done
-- KEYS[4] archivebot:tweets:attempt (hash)   KEYS[5] archivebot:tweets:failed
-- KEYS[6] archivebot:feed:urls (the url is kept beside the text, so each
-- network can word its own post)
-- ARGV[1] text   ARGV[2] now (UNIX seconds, the queue score)
-- ARGV[3] the job's url the text was made from
-- A KEYS of the wrong type: the WRONGTYPE error, before any write.
-- Returns  1 queued
--          0 the text is already queued, posted, being posted or given up
--         -1 the job has not started yet (no started_at)
--         -2 the job will not be tweeted: record gone or replaced (url
--            differs), finished, aborted, abort requested or failed
local e = expects(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'zset',
  KEYS[4], 'hash', KEYS[5], 'zset', KEYS[6], 'hash')
if e then return e end
local f = redis.call('HMGET', KEYS[1], 'url', 'started_at', 'finished_at',
  'aborted', 'abort_requested', 'failed')
local function set(v) return v and v ~= '' end
if not set(f[1]) or f[1] ~= ARGV[3] then
  return -2
end
if set(f[3]) or f[4] == 'true' or f[5] == 'true' or f[6] == 'true' then
  return -2
end
if not set(f[2]) then
  return -1
end
if redis.call('ZSCORE', KEYS[2], ARGV[1])
  or redis.call('ZSCORE', KEYS[3], ARGV[1])
  or redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1
  or redis.call('ZSCORE', KEYS[5], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[6], ARGV[1], ARGV[3])
return 1
