-- reap_reported: remember that a dead job's death was announced, so the
-- reaper does not announce it again (see reap.lua, which forgets it when
-- the job's heartbeat moves again or it leaves working).
--
-- KEYS[1] archivebot:reaper:reported (set)
-- ARGV[1] the job's ident
-- Returns 1 when newly remembered, 0 when it already was.
local bad = expect(KEYS[1], 'set')
if bad then
  return bad
end
return redis.call('SADD', KEYS[1], ARGV[1])
