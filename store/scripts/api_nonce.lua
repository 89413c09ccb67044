-- api_nonce: remember a verified request's nonce (doc/pipeline-api.md,
-- Signing), so that a replay to any node is refused.
--
-- KEYS[1] archivebot:pipeline_key:NAME:nonces (sorted set: nonce -> the
-- request's timestamp)
-- ARGV[1] nonce   ARGV[2] the request's timestamp
-- ARGV[3] window (seconds kept)   ARGV[4] most nonces kept
-- Returns 1 recorded; 0 seen before (replay); -1 too many in the window
-- (nothing written but the pruning of expired nonces).
--
-- Nonces are pruned by the request's own timestamp, never by the clock
-- of the node that runs this: a nonce scored more than the window before
-- a verified request's timestamp is stale for every node whose clock is
-- within the allowed skew of that request, so no node with a fast clock
-- can drop nonces that a node with a slower one would still accept.
if not typed(KEYS[1], 'zset') then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is not a sorted set')
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (tonumber(ARGV[2]) - tonumber(ARGV[3])))
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return -1
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]) * 2)
return 1
