-- expire: end a finished job's record now so its URL can be queued again,
-- but only when the record already has an expiry timer (a finished job).
--
-- KEYS[1] job hash  KEYS[2] log  KEYS[3] ignore set
-- KEYS[4] archivebot:history:IDENT  KEYS[5] archivebot:origin:IDENT
-- ARGV[1] the "expired" history entry (history.lua, prepended)
-- ARGV[2] TTL in seconds given to the history when it has none yet (the
--         origin record goes with the job)
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended):
-- a change made under a recorded command returns its recorded reply.
-- Returns 0 when the job does not exist, -1 when it has no expiry timer,
-- 1 when the keys were removed, -2 when the key is not a job (not a hash;
-- nothing written).
if not typed(KEYS[1], 'hash') then
  return -2
end
local bad = history_bad(KEYS[4])
if bad then
  return bad
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then
  return 0
end
if ttl < 0 then
  return -1
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5])
history(KEYS[4], ARGV[1])
if redis.call('TTL', KEYS[4]) == -1 then
  redis.call('EXPIRE', KEYS[4], ARGV[2])
end
return done(1)
