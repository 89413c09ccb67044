-- done: mark a job done (doc/protocol.md, What a pipeline does, step 6), as upstream's mark-done script.
-- KEYS[1] job hash (ident)   KEYS[2] its log   KEYS[3] its ignore set
-- KEYS[4] working   KEYS[5] jobs_aborted   KEYS[6] jobs_completed
-- KEYS[7] finish_notifications
-- ARGV[1] expiry of a completed job (172800)   ARGV[2] channel (updates)
-- ARGV[3] finished_at   ARGV[4] the finish notification (JSON)
-- Returns 1 when the job was aborted, 0 when it completed.
redis.call('HSET', KEYS[1], 'finished_at', ARGV[3])
redis.call('LREM', KEYS[4], 1, KEYS[1])
local aborted = redis.call('HGET', KEYS[1], 'aborted')
local ttl = ARGV[1]
local result = 0
if aborted then
  redis.call('INCR', KEYS[5])
  ttl = 5
  result = 1
else
  redis.call('INCR', KEYS[6])
end
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
redis.call('RPUSH', KEYS[7], ARGV[4])
redis.call('PUBLISH', ARGV[2], KEYS[1])
return result
