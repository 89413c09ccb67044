-- feed_claim: record an attempt to post on one network before it is sent:
-- its texts' state becomes "a:KEY", the attempt (with its post) is kept
-- for a restart, and it counts against the network's budget — unless the
-- budget is spent or a text is no longer pending, in which case nothing
-- is written.
--
-- KEYS[1] tweets:queue   KEYS[2] this network's attempts hash
-- KEYS[3] this network's sent zset   KEYS[4] this network's state hash
-- ARGV[1] now (UNIX ms)   ARGV[2] budget window (ms)
-- ARGV[3] budget (posts per window; 0 = none)   ARGV[4] attempt key
-- ARGV[5] attempt JSON   ARGV[6..] the texts the post carries
-- Returns {1} claimed, {0, 'budget'} or {0, 'gone', text}.
-- A KEYS of the wrong type: the WRONGTYPE error, before any write.
local e = expects(KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'zset', KEYS[4], 'hash')
if e then return e end
local now = tonumber(ARGV[1])
local budget = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. tostring(now - tonumber(ARGV[2])))
if budget > 0 and redis.call('ZCARD', KEYS[3]) >= budget then
  return {0, 'budget'}
end
for i = 6, #ARGV do
  if not redis.call('ZSCORE', KEYS[1], ARGV[i]) or redis.call('HEXISTS', KEYS[4], ARGV[i]) == 1 then
    return {0, 'gone', ARGV[i]}
  end
end
for i = 6, #ARGV do
  redis.call('HSET', KEYS[4], ARGV[i], 'a:' .. ARGV[4])
end
redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[3], now, ARGV[4])
return {1}
