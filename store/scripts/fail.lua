-- fail: give up on a job in one atomic step (reaper auto-fail and !fail).
--
-- KEYS[1] job hash (the ident)   KEYS[2] its log   KEYS[3] its ignore set
-- KEYS[4] jobs_failed            KEYS[5] archivebot:history:IDENT
-- KEYS[6] archivebot:failed:IDENT (the failure record, see doc/web.md)
-- KEYS[7] archivebot:origin:IDENT  KEYS[8] archivebot:finished
-- KEYS[9] archivebot:admin_notices   KEYS[10] working
-- KEYS[11 ..] every queue the ident may sit in (pending, pending-ao,
--            pending-large and each pending:NAME that exists), each
--            followed by its archivebot:paused:QUEUE list (where its jobs
--            wait while it is paused)
-- ARGV[1] the reason (failed_reason)
-- ARGV[2] expiry in seconds of the hash, log and ignore set (5)
-- ARGV[3] the "failed" history entry (history.lua, prepended)
-- ARGV[4] failed_by: the operator's nick, or "reaper"
-- ARGV[5] failed_at (UNIX seconds with fraction)
-- ARGV[6] TTL in seconds of the failure record, history and origin (7 days)
-- ARGV[7] an admin notice document to queue when the job is failed ('' for
--         none): the reaper's death line goes out only for a fail that
--         happened, delivered at least once by the admin notifier
--
-- The failure record holds url, reason, failed_by, failed_at, queue (where
-- the job was: a queue key or "working"), origin_queue (where register
-- queued it), job (the record as JSON), ignores (its patterns as a JSON
-- array) and, for a job on a pipeline, pipeline (its nickname, read from
-- the pipeline record named by pipeline_id, as reap.lua does), so `archivebot requeue` can queue it again as it was.
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended):
-- a change made under a recorded command returns its recorded reply.
-- Returns {code, field, value, ...}: code 0 when there is no job record
-- or only a ghost hash without `url` (nothing written), 2 when the job is already finished, aborted or failed
-- (nothing written; the fields are the record as it is), 1 when the job
-- was failed (the fields are the record after the change), -3 when the
-- key is not a job (not a hash; nothing written).
local t = job_type(KEYS[1]) -- a ghost is 'none'
if t ~= 'hash' then
  return t == 'none' and {0} or {-3}
end
local bad = history_bad(KEYS[5]) or expect(KEYS[6], 'hash') or expect(KEYS[7], 'hash')
  or expect(KEYS[8], 'zset') or expect(KEYS[3], 'set') or expect(KEYS[9], 'list')
if bad then
  return bad
end
local state = redis.call('HMGET', KEYS[1], 'finished_at', 'failed')
if state[1] or state[2] == 'true' then
  local out = redis.call('HGETALL', KEYS[1])
  table.insert(out, 1, 2)
  return out
end
-- The record as it was, for the failure record.
local before = redis.call('HGETALL', KEYS[1])
local job = {}
for i = 1, #before, 2 do
  job[before[i]] = before[i + 1]
end
local ignores = redis.call('SMEMBERS', KEYS[3])
redis.call('HSET', KEYS[1], 'failed', 'true', 'failed_reason', ARGV[1])
redis.call('INCR', KEYS[4])
local where = ''
for i = 10, #KEYS do
  if redis.call('LREM', KEYS[i], 0, KEYS[1]) > 0 and where == '' then
    where = KEYS[i]
  end
end
local origin = redis.call('HGET', KEYS[7], 'queue') or ''
local ign_json = '[]'
if #ignores > 0 then
  table.sort(ignores)
  ign_json = cjson.encode(ignores)
end
redis.call('DEL', KEYS[6])
redis.call('HSET', KEYS[6], 'url', job['url'] or '', 'reason', ARGV[1], 'failed_by', ARGV[4],
  'failed_at', ARGV[5], 'queue', where, 'origin_queue', origin, 'job', cjson.encode(job),
  'ignores', ign_json)
if job['pipeline_id'] then
  local nick = nickname(job['pipeline_id'])
  if nick then
    redis.call('HSET', KEYS[6], 'pipeline', nick)
  end
end
local keep = tonumber(ARGV[6])
redis.call('EXPIRE', KEYS[6], keep)
redis.call('ZADD', KEYS[8], ARGV[5], KEYS[1])
history(KEYS[5], ARGV[3])
redis.call('EXPIRE', KEYS[5], keep)
if redis.call('EXISTS', KEYS[7]) == 1 then
  redis.call('EXPIRE', KEYS[7], keep)
end
if ARGV[7] ~= '' then
  redis.call('RPUSH', KEYS[9], ARGV[7])
end
local ttl = tonumber(ARGV[2])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
local out = redis.call('HGETALL', KEYS[1])
table.insert(out, 1, 1)
return done(out)
