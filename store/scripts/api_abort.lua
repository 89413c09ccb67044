-- api_abort: upstream's MARK_ABORTED for a held job (doc/pipeline-api.md,
-- Abort a held job): HSET aborted true, PUBLISH updates IDENT.
--
-- KEYS[1] the job record   KEYS[2] the key's held set
-- ARGV[1] the key's pipeline record key   ARGV[2] the updates channel
-- Returns {1, ''}; {0, why} not held (nothing written).
local why = held_check()
if why then return {0, why} end
redis.call('HSET', KEYS[1], 'aborted', 'true')
redis.call('PUBLISH', ARGV[2], KEYS[1])
return {1, ''}
