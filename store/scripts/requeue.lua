-- requeue: put a failed or dead job back in the queue it came from, with
-- its settings, in one atomic step (`archivebot requeue`).
--
-- KEYS[1] job hash (the ident)   KEYS[2] its ignore set   KEYS[3] its log
-- KEYS[4] archivebot:failed:IDENT (failure record)
-- KEYS[5] archivebot:origin:IDENT (origin record, field `queue`)
-- KEYS[6] the queue the caller expects the job to go to
-- KEYS[7] working                 KEYS[8] archivebot:finished
-- KEYS[9] archivebot:reaper:reported
-- KEYS[10] the pipeline record the caller expects the job to name ("" none)
-- KEYS[11] archivebot:queues (index of pending:NAME queues)
-- KEYS[12] archivebot:paused   KEYS[13] archivebot:paused:QUEUE of KEYS[6]
--          (where the job goes while that queue is paused)
-- ARGV[1] now, UNIX seconds (the new queued_at)
-- ARGV[2] "1" to requeue even though the job's pipeline still reports
-- ARGV[3] seconds after which a pipeline's `ts` counts as silent
-- ARGV[4 ..] the fields reset for the new run (removed from the record)
--
-- Where the job goes: the origin record's `queue`; else the failure
-- record's `queue` when it is a pending queue; else pending-ao for a
-- shallow job and pending for the others.
--
-- Returns, with nothing written unless the code is 1:
--   {1, queue, number of ignore patterns, source}  requeued; source is
--       "failed" (rebuilt from a failure record) or "dead" (a running job
--       taken back from working)
--   {0}            no job record and no failure record
--   {-3}           the job key is not a hash
--   {-4}           the job has finished (or was aborted)
--   {-5, pipeline, ts}  the pipeline that ran it (its pipeline_id) still
--       reports: it may still be crawling it (no force). This holds for a
--       failed job too: failing does not stop a pipeline, and its mark-done
--       would finish the new run.
--   {-6}           the job record exists and is queued, or is not running
--   {-7}           a failure record without the job's settings (`job`)
--   {-9, queue, pipeline}  KEYS[6] or KEYS[10] are not what the records
--       say: call again with these
local bad = expect(KEYS[2], 'set') or expect(KEYS[3], 'zset') or expect(KEYS[4], 'hash')
  or expect(KEYS[5], 'hash') or expect(KEYS[6], 'list') or expect(KEYS[7], 'list')
  or expect(KEYS[8], 'zset') or expect(KEYS[9], 'set') or expect(KEYS[11], 'set')
  or expect(KEYS[12], 'hash') or expect(KEYS[13], 'list')
if bad then
  return bad
end
local jt = job_type(KEYS[1]) -- a ghost is 'none': requeued over (deleted below)
if jt ~= 'none' and jt ~= 'hash' then
  return {-3}
end

local function pendingQueue(q)
  return q == K.pending or q == K.pending_ao or q == K.pending_large
    or (string.sub(q, 1, #K.named_prefix) == K.named_prefix and #q > #K.named_prefix)
end

-- The job's fields, as a Lua table, and where they came from.
local fields, source, pipeline = nil, nil, ''
local failed = redis.call('HGETALL', KEYS[4])
local failure = {}
for i = 1, #failed, 2 do
  failure[failed[i]] = failed[i + 1]
end

local function fromHash()
  local flat = redis.call('HGETALL', KEYS[1])
  local t = {}
  for i = 1, #flat, 2 do
    t[flat[i]] = flat[i + 1]
  end
  return t
end

if jt == 'hash' then
  local state = redis.call('HMGET', KEYS[1], 'finished_at', 'failed', 'pipeline_id')
  if state[2] == 'true' then
    source = 'failed'
  elseif state[1] then
    return {-4}
  elseif redis.call('LPOS', KEYS[7], KEYS[1]) then
    source = 'dead'
  else
    return {-6}
  end
end
if source == nil or source == 'failed' then
  if failure['job'] then
    local ok, decoded = pcall(cjson.decode, failure['job'])
    if ok and type(decoded) == 'table' then
      fields = {}
      for k, v in pairs(decoded) do
        if type(v) == 'string' then
          fields[k] = v
        elseif type(v) == 'number' or type(v) == 'boolean' then
          fields[k] = tostring(v)
        end
      end
    end
  end
  if fields == nil then
    if jt == 'hash' then
      fields = fromHash()
    elseif next(failure) == nil then
      return {0}
    else
      return {-7}
    end
  end
  source = 'failed'
else
  fields = fromHash()
end

-- The pipeline that ran it last: while it still reports, it may still be
-- crawling the job, and its mark-done would finish the new run's record.
pipeline = fields['pipeline_id'] or ''

local queue = redis.call('HGET', KEYS[5], 'queue')
if not (queue and pendingQueue(queue)) then
  queue = failure['queue']
  if not (queue and pendingQueue(queue)) then
    if fields['fetch_depth'] == 'shallow' then
      queue = K.pending_ao
    else
      queue = K.pending
    end
  end
end
if queue ~= KEYS[6] or pipeline ~= KEYS[10] then
  return {-9, queue, pipeline}
end

if ARGV[2] ~= '1' and pipeline ~= '' then
  local pt = redis.call('TYPE', pipeline)['ok']
  if pt == 'hash' then
    local ts = tonumber(redis.call('HGET', pipeline, 'ts'))
    if ts and ts >= tonumber(ARGV[1]) - tonumber(ARGV[3]) then
      return {-5, pipeline, tostring(ts)}
    end
  end
end

-- The ignore patterns: those recorded with the failure, else the set as it
-- still is (a dead job, or a fail less than 5 s ago).
local patterns = nil
if failure['ignores'] then
  local ok, decoded = pcall(cjson.decode, failure['ignores'])
  if ok and type(decoded) == 'table' then
    patterns = {}
    for _, p in ipairs(decoded) do
      if type(p) == 'string' then
        patterns[#patterns + 1] = p
      end
    end
  end
end

-- Writes start here.
for i = 4, #ARGV do
  fields[ARGV[i]] = nil
end
fields['queued_at'] = ARGV[1]
local flat = {}
for k, v in pairs(fields) do
  flat[#flat + 1] = k
  flat[#flat + 1] = v
end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('HSET', KEYS[1], unpack(flat))
if patterns then
  redis.call('DEL', KEYS[2])
  for i = 1, #patterns, 500 do
    local chunk = {}
    for j = i, math.min(i + 499, #patterns) do
      chunk[#chunk + 1] = patterns[j]
    end
    redis.call('SADD', KEYS[2], unpack(chunk))
  end
end
redis.call('PERSIST', KEYS[2])
local nIgnores = redis.call('SCARD', KEYS[2])
redis.call('LREM', KEYS[7], 0, KEYS[1])
redis.call('LPUSH', push_target(KEYS[12], KEYS[6], KEYS[13]), KEYS[1])
if string.sub(KEYS[6], 1, #K.named_prefix) == K.named_prefix then
  redis.call('SADD', KEYS[11], KEYS[6])
end
redis.call('DEL', KEYS[4])
-- The origin record lives as long as the job: a TTL set when it ended goes.
redis.call('PERSIST', KEYS[5])
redis.call('ZREM', KEYS[8], KEYS[1])
redis.call('SREM', KEYS[9], KEYS[1])
return {1, queue, nIgnores, source}
