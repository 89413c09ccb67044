-- settings: change a job's settings, bump settings_age and publish the new
-- age, in one atomic step, so a running crawler never reads half a change
-- (doc/protocol.md, Job settings).
--
-- KEYS[1] job hash   KEYS[2] ignore set   KEYS[3] job settings channel
-- KEYS[4] archivebot:history:IDENT
-- ARGV[1] how much settings_age rises (0: no bump, no publish)
-- ARGV[2] 1 to refuse finished jobs, 0 to allow them, 2 to refuse every
--         job a pipeline has taken (only queued jobs change)
-- ARGV[3] the history entry of the change (history.lua, prepended)
-- ARGV[4] n, then n values: field/value pairs to HSET
-- then m, then m fields to HDEL
-- then a, then a patterns to SADD
-- then r, then r patterns to SREM
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended):
-- a change made under a recorded command returns its recorded reply.
-- Returns {1, age} on success, {0, 0} when the job does not exist,
-- {-1, 0} when it has finished (and ARGV[2] is 1 or 2), {-2, 0} when the
-- key is not a job (not a hash; nothing written), {-3, 0} when a pipeline
-- has taken it (and ARGV[2] is 2).
local t = job_type(KEYS[1]) -- a ghost is 'none'
if t ~= 'hash' then
  return t == 'none' and {0, 0} or {-2, 0}
end
local bad = history_bad(KEYS[4])
if bad then
  return bad
end
if ARGV[2] == '1' or ARGV[2] == '2' then
  local st = redis.call('HMGET', KEYS[1], 'finished_at', 'failed', 'started_at', 'pipeline_id')
  if st[1] or st[2] == 'true' then
    return {-1, 0}
  end
  if ARGV[2] == '2' and (st[3] or st[4]) then
    return {-3, 0}
  end
end
local i = 4
local function take()
  local n = tonumber(ARGV[i])
  local out = {}
  for k = i + 1, i + n do
    out[#out + 1] = ARGV[k]
  end
  i = i + n + 1
  return out
end
local hset, hdel, sadd, srem = take(), take(), take(), take()
if #hset > 0 then redis.call('HSET', KEYS[1], unpack(hset)) end
if #hdel > 0 then redis.call('HDEL', KEYS[1], unpack(hdel)) end
if #sadd > 0 then redis.call('SADD', KEYS[2], unpack(sadd)) end
if #srem > 0 then redis.call('SREM', KEYS[2], unpack(srem)) end
local bump = tonumber(ARGV[1])
local age = tonumber(redis.call('HGET', KEYS[1], 'settings_age') or '0')
if bump > 0 then
  age = redis.call('HINCRBY', KEYS[1], 'settings_age', bump)
  redis.call('PUBLISH', KEYS[3], age)
end
history(KEYS[4], ARGV[3])
return done({1, age})
