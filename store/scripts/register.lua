-- register: create a job record and queue it in one atomic step.
--
-- KEYS[1] job hash (the ident)   KEYS[2] ignore set   KEYS[3] queue
-- KEYS[4] the queue the pending limit counts ("pending")
-- KEYS[5] archivebot:queues, the index of named queues (KEYS[3] is added
--         when it is a pending:NAME queue)
-- KEYS[6] archivebot:history:IDENT   KEYS[7] archivebot:origin:IDENT
-- KEYS[8] archivebot:queued_by:NICK (the queuing nick's queued idents)
-- KEYS[9] the job's log   KEYS[10] archivebot:failed:IDENT (failure record)
-- KEYS[11] archivebot:paused   KEYS[12] archivebot:paused:QUEUE (where
--         the job goes while KEYS[3] is paused: doc/protocol.md, Paused
--         queues)   KEYS[13] archivebot:paused:pending (counted with KEYS[4])
-- ARGV[1] pending limit (0 = no limit)
-- ARGV[2] per-user pending limit (0 = no limit): refused when KEYS[8]
--         already holds that many jobs still queued
-- ARGV[3] the "queued" history entry (history.lua, prepended)
-- ARGV[4] notify_start for the origin record ("1" or "0")
-- ARGV[5] TTL in seconds of KEYS[8], renewed on every job
-- ARGV[6] the queuing nick folded with the server's CASEMAPPING, and
-- ARGV[7] "1" when an operator queued it: kept in the origin record for
--         the take rule's per-user running limit
-- ARGV[8] n, the number of field/value pairs that follow
-- ARGV[9 .. 8+2n] field, value, ...   (queued_at included)
-- ARGV[9+2n .. #ARGV-2] ignore patterns
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended):
-- a change made under a recorded command returns its recorded reply.
-- Which record speaks for a job (doc/protocol.md): a hash without `url` is
-- a ghost, re-created by a pipeline's late write after the job ended; it
-- never blocks a registration: the ghost, its log and ignore set are
-- deleted in this step. A failure record speaks only while no newer
-- registration exists: this step deletes it.
-- Returns {1, 0} when created, {-1, 0} when the job record already exists,
-- {-2, 0} when the pending limit is reached, {-4, count} when the nick
-- already has count >= the per-user limit jobs queued. Nothing is written
-- unless 1 is returned, except that idents of KEYS[8] that are no longer
-- queued are forgotten while counting.
--
-- A Redis script is not rolled back when a command fails half-way, so
-- every key's type is checked before the first write: a wrong-typed key
-- is an error with nothing written, never a record without its queue entry.
local bad = expect(KEYS[2], 'set') or expect(KEYS[3], 'list') or expect(KEYS[4], 'list')
  or expect(KEYS[5], 'set') or history_bad(KEYS[6]) or expect(KEYS[7], 'hash')
  or expect(KEYS[8], 'set') or expect(KEYS[11], 'hash') or expect(KEYS[12], 'list')
  or expect(KEYS[13], 'list')
if bad then
  return bad
end
local ghost = false
if redis.call('EXISTS', KEYS[1]) == 1 then
  if job_type(KEYS[1]) ~= 'none' then
    return {-1, 0}
  end
  ghost = true
end
local limit = tonumber(ARGV[1])
if limit > 0 and redis.call('LLEN', KEYS[4]) + redis.call('LLEN', KEYS[13]) >= limit then
  return {-2, 0}
end
local user_limit = tonumber(ARGV[2])
if user_limit > 0 then
  -- A job counts while its record exists and no pipeline took it.
  local count = 0
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[8])) do
    local ok, f = pcall(redis.call, 'HMGET', id, 'url', 'started_at', 'pipeline_id', 'finished_at', 'failed')
    if ok and f[1] and not f[2] and not f[3] and not f[4] and f[5] ~= 'true' then
      count = count + 1
    else
      redis.call('SREM', KEYS[8], id)
    end
  end
  if count >= user_limit then
    return {-4, count}
  end
end
if ghost then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[9])
end
redis.call('DEL', KEYS[10])
local n = tonumber(ARGV[8])
local fields = {}
for i = 9, 8 + 2 * n do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], unpack(fields))
local first = 9 + 2 * n
local last = #ARGV - 2 -- the command record takes the last two
if first <= last then
  local patterns = {}
  for i = first, last do
    patterns[#patterns + 1] = ARGV[i]
    if #patterns == 500 then
      redis.call('SADD', KEYS[2], unpack(patterns))
      patterns = {}
    end
  end
  if #patterns > 0 then
    redis.call('SADD', KEYS[2], unpack(patterns))
  end
end
redis.call('LPUSH', push_target(KEYS[11], KEYS[3], KEYS[12]), KEYS[1])
if string.sub(KEYS[3], 1, #K.named_prefix) == K.named_prefix then
  redis.call('SADD', KEYS[5], KEYS[3])
end
-- Our own records of the job: where it was queued, whether its start is
-- announced, and its history, which lives as long as the job (a TTL left
-- from an earlier job of the same URL is removed).
redis.call('DEL', KEYS[7])
redis.call('HSET', KEYS[7], 'queue', KEYS[3], 'notify_start', ARGV[4], 'nick', ARGV[6], 'op', ARGV[7])
redis.call('SADD', KEYS[8], KEYS[1])
redis.call('EXPIRE', KEYS[8], ARGV[5])
redis.call('PERSIST', KEYS[6])
history(KEYS[6], ARGV[3])
return done({1, 0})
