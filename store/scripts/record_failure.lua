-- Writes the failure record of a job (archivebot:failed:IDENT) and adds the
-- job to the index of finished jobs, in one step. See doc/web.md,
-- "Failure records", for the fields.
--
-- KEYS[1]  archivebot:failed:IDENT (hash)
-- KEYS[2]  archivebot:finished (sorted set)
-- ARGV[1]  ident
-- ARGV[2]  failed_at (UNIX seconds, the index score)
-- ARGV[3]  TTL of the record in seconds
-- ARGV[4…] field, value, field, value, …
--
-- Returns 1, or -1 when a key has the wrong type (nothing written).
if not typed(KEYS[1], 'hash') or not typed(KEYS[2], 'zset') then return -1 end
redis.call('DEL', KEYS[1])
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
