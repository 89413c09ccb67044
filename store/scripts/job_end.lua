-- job_end: record what the finish notifier observed: a pipeline finished
-- or aborted a job (doc/protocol.md, Job history).
--
-- KEYS[1] archivebot:history:IDENT   KEYS[2] archivebot:origin:IDENT
-- ARGV[1] the "finished" or "aborted" history entry (history.lua, prepended)
-- ARGV[2] its event   ARGV[3] who ended it (entry's "by")
-- ARGV[4] TTL in seconds of the history and origin records
--
-- A notice delivered twice (a crash between its line and its
-- acknowledgement) appends its entry once: an entry whose last entry has
-- the same event and "by" is not appended again.
-- Returns 1 when appended, 0 when it was already there, -1 when the
-- history key is not a list (nothing written).
if history_bad(KEYS[1]) then
  return -1
end
local appended = 0
local last = redis.call('LINDEX', KEYS[1], -1)
local ok, e = false, nil
if last then
  ok, e = pcall(cjson.decode, last)
end
if not (ok and type(e) == 'table' and e['event'] == ARGV[2] and e['by'] == ARGV[3]) then
  history(KEYS[1], ARGV[1])
  appended = 1
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
if redis.call('TYPE', KEYS[2])['ok'] == 'hash' then
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
return appended
