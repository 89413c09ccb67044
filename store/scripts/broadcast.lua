-- broadcast: the live stream sent a job's log entries up to a score; move
-- its bookmark there and stamp ts, as upstream's firehose did
-- (doc/protocol.md, Live stream). Compare and set: only when the bookmark
-- is still the one the entries were read after, so two nodes streaming the
-- same Redis cannot move it backwards; never re-creates an expired job.
--
-- KEYS[1] job hash (the ident)
-- ARGV[1] last_broadcasted_log_entry as read ("" = none)
-- ARGV[2] the score of the last entry sent
-- ARGV[3] now, float UNIX seconds
-- Returns 1 when moved, 0 when the bookmark had moved, -1 when the job is
-- gone (or its key is not a hash).
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then
  return -1
end
local cur = redis.call('HGET', KEYS[1], 'last_broadcasted_log_entry') or ''
if cur ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'last_broadcasted_log_entry', ARGV[2], 'ts', ARGV[3])
return 1
