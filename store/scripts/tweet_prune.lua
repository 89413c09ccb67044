-- tweet_prune: forget texts posted or given up before a cutoff, and attempt
-- records older than it whose text is no longer queued.
--
-- KEYS[1] tweets:done   KEYS[2] archivebot:tweets:failed
-- KEYS[3] archivebot:tweets:attempt   KEYS[4] tweets:queue
-- ARGV[1] cutoff (UNIX seconds; entries scored below it go)
-- A KEYS of the wrong type: the WRONGTYPE error, before any write.
-- Returns {removed from done, removed from failed, attempt records removed}.
local e = expects(KEYS[1], 'zset', KEYS[2], 'zset', KEYS[3], 'hash', KEYS[4], 'zset')
if e then return e end
local cutoff = tonumber(ARGV[1])
local done = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
local failed = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
local attempts = 0
local all = redis.call('HGETALL', KEYS[3])
for i = 1, #all, 2 do
  local t = tonumber(all[i + 1])
  if (t == nil or t < cutoff) and not redis.call('ZSCORE', KEYS[4], all[i]) then
    redis.call('HDEL', KEYS[3], all[i])
    attempts = attempts + 1
  end
end
return {done, failed, attempts}
