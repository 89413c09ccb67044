-- reroute: take a job away from the pipeline API key that holds it and
-- queue it again at the front, with a key made to avoid the job's site,
-- in one atomic step (!reroute, `archivebot reroute`; doc/pipeline-api.md,
-- A ban shows itself).
--
-- A running job held by an API key is taken back: out of `working` and
-- the key's held set, the fields of its run removed (ARGV[8 ..]), its log
-- and ban check deleted, settings_age bumped and published on its job
-- channel (the node that serves the key reads the record, finds it names
-- no pipeline, and tells the key on its control stream: released), then
-- pushed at the head (the right end, which a take pops first) of its
-- queue. A queued job moves to the head of the list that holds it. The
-- avoiding key (ARGV[4]) gets the rule ARGV[5] in its operators' avoid
-- list, unless it has it already. When the caller asks for it, the line
-- for the job's channel goes into the admin notices in this same step
-- (`archivebot reroute`; !reroute replies in the channel itself): the
-- document for a running job taken back (ARGV[8]) or the one for a queued
-- job moved (ARGV[9]), whichever the script finds.
--
-- KEYS[1] job hash   KEYS[2] archivebot:history:IDENT
-- KEYS[3] archivebot:origin:IDENT   KEYS[4] archivebot:job:IDENT (channel)
-- KEYS[5] working   KEYS[6] the holder's held set ("" when none is expected)
-- KEYS[7] the avoiding key's avoid set ("" when none)
-- KEYS[8] archivebot:pipeline_keys   KEYS[9] the queue the caller expects
-- the job to go back to   KEYS[10] archivebot:paused
-- KEYS[11] archivebot:paused:QUEUE of KEYS[9]   KEYS[12] archivebot:queues
-- KEYS[13] the job's log   KEYS[14] archivebot:ban_check:IDENT
-- KEYS[15] the updates channel   KEYS[16] archivebot:admin_notices
-- KEYS[17 ..] every queue the job may wait in, each followed by its paused
-- list (as move.lua)
-- ARGV[1] the job URL the caller read   ARGV[2] the pipeline_id it read
-- ("" none)   ARGV[3] the holder's key name ("" none)
-- ARGV[4] the avoiding key's name ("" none)   ARGV[5] the rule ("" none)
-- ARGV[6] the most rules an avoid list holds   ARGV[7] the history entry
-- ARGV[8] the admin notice document to queue when a running job is taken
-- back ('' none)   ARGV[9] the one to queue when a queued job moves ('' none)
-- ARGV[10] the started_in the caller read   ARGV[11] the started_by it read
-- (the notice names that channel and nick)
-- ARGV[12 ..] the fields of a run, removed from a running job
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended)
--
-- Returns, with nothing written (and no notice queued) unless the code is
-- 1 or 2:
--   {1, queue, added}  a running job was taken back and queued at the
--       head of queue; added is 1 when the rule was added, 0 when the
--       list had it (or there is no rule)
--   {2, queue, added}  a queued job moved to the head of queue
--   {0}   no such job             {-1}  the job has finished or failed
--   {-3}  the key is not a job    {-4}  an abort was requested: it is ending
--   {-5, pipeline_id}  running on a pipeline that is no API key (a direct
--         pipeline, or one not known): it cannot be told to let go
--   {-6}  neither queued nor running
--   {-7, n}  the avoid list is full (n rules)
--   {-8}  the avoiding key is not registered
--   {-9, url, pipeline_id, queue, started_in, started_by}  the records
--         are not what the caller read: call again with these
--   {-10} a queued job and no avoiding key (nothing to change)
local t = job_type(KEYS[1]) -- a ghost is 'none'
if t ~= 'hash' then
  return t == 'none' and {0} or {-3}
end
local bad = history_bad(KEYS[2]) or expects(KEYS[3], 'hash', KEYS[5], 'list', KEYS[8], 'hash',
  KEYS[9], 'list', KEYS[10], 'hash', KEYS[11], 'list', KEYS[12], 'set', KEYS[13], 'zset',
  KEYS[16], 'list')
if not bad and KEYS[6] ~= '' then bad = expect(KEYS[6], 'set') end
if not bad and KEYS[7] ~= '' then bad = expect(KEYS[7], 'set') end
if bad then
  return bad
end
local f = redis.call('HMGET', KEYS[1], 'finished_at', 'failed', 'aborted', 'abort_requested',
  'pipeline_id', 'url', 'fetch_depth', 'started_in', 'started_by')
if f[1] or f[2] == 'true' or f[3] == 'true' then
  return {-1}
end
local pid = f[5] or ''

local function pending_queue(q)
  return q == K.pending or q == K.pending_ao or q == K.pending_large
    or (string.sub(q, 1, #K.named_prefix) == K.named_prefix and #q > #K.named_prefix)
end

-- Where the job waits now, if it does.
local from = list_holding(17)
-- Where it goes: the list that holds it; else the origin record's queue;
-- else the queue its depth implies.
local queue = nil
if from then
  queue = queue_name(from)
else
  queue = redis.call('HGET', KEYS[3], 'queue')
  if not (queue and pending_queue(queue)) then
    if f[7] == 'shallow' then queue = K.pending_ao else queue = K.pending end
  end
end
if (f[6] or '') ~= ARGV[1] or pid ~= ARGV[2] or queue ~= KEYS[9]
  or (f[8] or '') ~= ARGV[10] or (f[9] or '') ~= ARGV[11] then
  return {-9, f[6] or '', pid, queue, f[8] or '', f[9] or ''}
end
if f[4] == 'true' then
  return {-4}
end
if not from then
  if pid == '' then
    return {-6}
  end
  if ARGV[3] == '' or KEYS[6] == '' then
    return {-5, pid}
  end
elseif ARGV[4] == '' then
  return {-10}
end
if ARGV[4] ~= '' and redis.call('HEXISTS', KEYS[8], ARGV[4]) == 0 then
  return {-8}
end
local added = 0
if ARGV[5] ~= '' and KEYS[7] ~= '' and redis.call('SISMEMBER', KEYS[7], ARGV[5]) == 0 then
  local n = redis.call('SCARD', KEYS[7])
  if n >= tonumber(ARGV[6]) then
    return {-7, n}
  end
  added = 1
end

-- Writes start here.
if added == 1 then
  redis.call('SADD', KEYS[7], ARGV[5])
end
local code = 2
local to = from
if not from then
  code = 1
  redis.call('LREM', KEYS[5], 0, KEYS[1])
  redis.call('SREM', KEYS[6], KEYS[1])
  redis.call('HDEL', KEYS[1], unpack(ARGV, 12, #ARGV - 2))
  redis.call('DEL', KEYS[13], KEYS[14])
  local age = redis.call('HINCRBY', KEYS[1], 'settings_age', 1)
  redis.call('PUBLISH', KEYS[4], age)
  to = push_target(KEYS[10], KEYS[9], KEYS[11])
  if string.sub(queue, 1, #K.named_prefix) == K.named_prefix then
    redis.call('SADD', KEYS[12], queue)
  end
else
  redis.call('LREM', from, 1, KEYS[1])
end
redis.call('RPUSH', to, KEYS[1])
redis.call('HSET', KEYS[3], 'queue', queue)
redis.call('PUBLISH', KEYS[15], KEYS[1])
history(KEYS[2], ARGV[7])
local notice = ARGV[9]
if code == 1 then
  notice = ARGV[8]
end
if notice ~= '' then
  redis.call('RPUSH', KEYS[16], notice)
end
return done({code, queue, added})
