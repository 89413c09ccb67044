-- web_revoke: end dashboard sessions (sign-out, !logout, `archivebot
-- sessions revoke`), each from the session hash and both indexes at once.
--
-- KEYS[1] archivebot:web:sessions  KEYS[2] archivebot:web:nick:NICK_KEY
-- KEYS[3..] archivebot:web:session:ID, one per session
-- ARGV[i] the session id of KEYS[i+2]
-- Returns how many sessions existed and were ended.
local n = 0
for i = 3, #KEYS do
  n = n + redis.call('DEL', KEYS[i])
  redis.call('ZREM', KEYS[1], ARGV[i - 2])
  redis.call('ZREM', KEYS[2], ARGV[i - 2])
end
return n
