-- ban_check: the ban line (doc/pipeline-api.md, A ban shows itself). Counts
-- the first responses of a job and, when the first N were all errors,
-- queues the channel line once, in the same step that records it.
--
-- KEYS[1] archivebot:ban_check:IDENT   KEYS[2] the job record
-- KEYS[3] archivebot:admin_notices
-- ARGV[1] N   ARGV[2] TTL of the check's key (seconds)
-- ARGV[3] the pipeline's name   ARGV[4] the site (registered domain)
-- ARGV[5] the ident   ARGV[6..] one label per response, in order: "ok",
-- or the error's: "403", "429", "5xx code" or "network"
-- Returns {state, text}: state "posted" (the line queued now, text is it),
-- "done" (decided before: nothing written), "clear" (a response that is not
-- an error: no line, ever), "counting" (fewer than N seen so far).
local k = KEYS[1]
local state = redis.call('HGET', k, 'state')
if state then return {'done', state} end
local n, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local seen = tonumber(redis.call('HGET', k, 'seen') or '0')
for i = 6, #ARGV do
  if seen >= n then break end
  seen = seen + 1
  local c = ARGV[i]
  if c == 'ok' then
    redis.call('DEL', k)
    redis.call('HSET', k, 'state', 'clear')
    redis.call('EXPIRE', k, ttl)
    return {'clear', ''}
  end
  redis.call('HINCRBY', k, 'c:' .. c, 1)
end
if seen < n then
  redis.call('HSET', k, 'seen', seen)
  redis.call('EXPIRE', k, ttl)
  return {'counting', ''}
end
local all = redis.call('HGETALL', k)
local best, bestn = '', 0
for i = 1, #all, 2 do
  local f, v = all[i], tonumber(all[i + 1])
  if string.sub(f, 1, 2) == 'c:' then
    local c = string.sub(f, 3)
    if v > bestn or (v == bestn and c < best) then best, bestn = c, v end
  end
end
if best == 'network' then best = 'network error' end
local text = 'Job ' .. ARGV[5] .. ' on ' .. ARGV[3] .. ': the first ' .. n ..
  ' responses were errors (' .. bestn .. '\195\151 ' .. best .. '); ' .. ARGV[3] ..
  ' may be banned from ' .. ARGV[4]
local channel = ''
if redis.call('TYPE', KEYS[2]).ok == 'hash' then
  channel = redis.call('HGET', KEYS[2], 'started_in') or ''
end
redis.call('RPUSH', KEYS[3], cjson.encode({channel = channel, text = text}))
redis.call('DEL', k)
redis.call('HSET', k, 'state', 'posted')
redis.call('EXPIRE', k, ttl)
return {'posted', text}
