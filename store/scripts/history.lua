-- history: prepended to every script that changes a job (after
-- cmdrecord.lua for user commands), so the change and its history entry
-- are one atomic step (doc/protocol.md, Job history).
--
-- history(key, entry) appends the JSON entry to the job's history list
-- (archivebot:history:IDENT), keeps the last 100 entries, and publishes the
-- same entry on archivebot:job_events (K.job_events). An empty entry appends nothing.
-- history_bad(key) returns an error reply when key is not a list (to be
-- checked before the script's first write), nil otherwise.
local HISTORY_MAX = 100
local JOB_EVENTS = K.job_events
local function history_bad(key)
  return expect(key, 'list')
end
local function history(key, entry)
  if not entry or entry == '' then
    return
  end
  redis.call('RPUSH', key, entry)
  redis.call('LTRIM', key, -HISTORY_MAX, -1)
  redis.call('PUBLISH', JOB_EVENTS, entry)
end
