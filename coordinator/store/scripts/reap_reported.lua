-- reap_reported: remember that a dead job's death was announced, so the
-- reaper does not announce it again (see reap.lua, which forgets it when
-- the job's heartbeat moves again or it leaves working).
--
-- KEYS[1] archivebot:reaper:reported (set)
-- ARGV[1] the job's ident
-- Returns 1 when newly remembered, 0 when it already was.
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'set' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a ' .. t .. ', not a set')
end
return redis.call('SADD', KEYS[1], ARGV[1])
