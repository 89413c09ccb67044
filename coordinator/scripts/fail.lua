-- fail: give up on a job in one atomic step (reaper auto-fail and !fail).
--
-- KEYS[1] job hash (the ident)   KEYS[2] its log   KEYS[3] its ignore set
-- KEYS[4] jobs_failed            KEYS[5] working
-- KEYS[6 ..] every queue the ident may sit in (pending, pending-ao,
--            pending-large and each pending:NAME that exists)
-- ARGV[1] the reason (failed_reason)
-- ARGV[2] expiry in seconds of the hash, log and ignore set (5)
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended):
-- a change made under a recorded command returns its recorded reply.
-- Returns {code, field, value, ...}: code 0 when there is no job record
-- (nothing written), 2 when the job is already finished, aborted or failed
-- (nothing written; the fields are the record as it is), 1 when the job
-- was failed (the fields are the record after the change), -3 when the
-- key is not a job (not a hash; nothing written).
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  return {0}
end
if t ~= 'hash' then
  return {-3}
end
local state = redis.call('HMGET', KEYS[1], 'finished_at', 'failed')
if state[1] or state[2] == 'true' then
  local out = redis.call('HGETALL', KEYS[1])
  table.insert(out, 1, 2)
  return out
end
redis.call('HSET', KEYS[1], 'failed', 'true', 'failed_reason', ARGV[1])
redis.call('INCR', KEYS[4])
for i = 5, #KEYS do
  redis.call('LREM', KEYS[i], 0, KEYS[1])
end
local ttl = tonumber(ARGV[2])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
local out = redis.call('HGETALL', KEYS[1])
table.insert(out, 1, 1)
return done(out)
