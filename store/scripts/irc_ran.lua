-- irc_ran: the leader records that it runs a command read from IRC that
-- writes nothing of its own (a read like !status), before it answers, so
-- that a node taking over later does not answer it again
-- (doc/reliability.md, A hot standby on IRC). Commands that change state
-- record the same key in their own script instead (cmdrecord.lua).
--
-- KEYS[1] archivebot:irc:ran:KEY
-- ARGV[1] lifetime in seconds
-- Returns 1 when recorded now, 0 when the key was recorded before.
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', tonumber(ARGV[1])) then
  return 1
end
return 0
