-- web_revoke: end dashboard sessions (sign-out, !logout, `archivebot
-- sessions revoke`, a session whose owner left the nick), each from the
-- session hash and every index at once.
--
-- KEYS[1] archivebot:web:sessions  KEYS[2] archivebot:web:rankless
-- KEYS[3] archivebot:web:nick:NICK_KEY
-- KEYS[4..] archivebot:web:session:ID, one per session
-- ARGV[i] the session id of KEYS[i+3]
-- Returns how many sessions existed and were ended.
local n = 0
for i = 4, #KEYS do
  n = n + redis.call('DEL', KEYS[i])
  for k = 1, 3 do redis.call('ZREM', KEYS[k], ARGV[i - 3]) end
end
return n
