-- Adds a finished job to our index of finished jobs (see doc/web.md,
-- "/finished"), and drops index entries older than the failure records'
-- lifetime, so the index never grows without bound.
--
-- KEYS[1]  job record (hash)
-- KEYS[2]  archivebot:finished (sorted set: member ident, score finished_at)
-- ARGV[1]  ident
-- ARGV[2]  prune: entries scored below this are removed
--
-- Returns 1 when the job was indexed, 0 when it has no finished_at (or no
-- record), -1 when a key has the wrong type (nothing written).
if not typed(KEYS[1], 'hash') or not typed(KEYS[2], 'zset') then return -1 end
local at = redis.call('HGET', KEYS[1], 'finished_at')
local done = 0
if at and tonumber(at) then
  redis.call('ZADD', KEYS[2], tonumber(at), ARGV[1])
  done = 1
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2])
return done
