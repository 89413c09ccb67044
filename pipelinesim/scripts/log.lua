-- log: ship one log entry (doc/protocol.md, What a pipeline does, step 4).
-- KEYS[1] job hash (ident)   KEYS[2] its log
-- ARGV[1] the entry (JSON)   ARGV[2] channel (updates)
-- Returns the entry's score.
local n = redis.call('HINCRBY', KEYS[1], 'log_score', 1)
redis.call('ZADD', KEYS[2], n, ARGV[1])
redis.call('PUBLISH', ARGV[2], KEYS[1])
return n
