-- cmdrecord: prepended to the scripts of user commands (register, settings,
-- abort, fail, expire), so that a command whose reply was lost can be sent
-- again and is applied at most once, and its outcome can be known.
--
-- ARGV[#ARGV - 1] lifetime of the record in seconds
-- ARGV[#ARGV]     key of this command's outcome record, archivebot:cmd:ID,
--                 or '' when the caller keeps no record (services)
-- and, after those two (removed here, so the script's own indexes and the
-- two above are unchanged):
-- ARGV[#ARGV]     archivebot:irc:ran:KEY, the IRC line this command was
--                 read from (store.WithIRCLine), or '': written by done()
--                 with the record, so a node taking over knows the line ran
-- The record is written only by done(), in the same script as the change,
-- so it exists exactly when the change was made. A script that finds its
-- record returns the recorded reply and writes nothing. Refusals write no
-- record: they change nothing, and running them again answers anew.
local ran_key = table.remove(ARGV)
local cmd_key, cmd_ttl = ARGV[#ARGV], tonumber(ARGV[#ARGV - 1])
if cmd_key ~= '' then
  local rec = redis.call('GET', cmd_key)
  if rec then
    -- Rewritten (same value and TTL) so that a WAIT after this call also
    -- covers the original write, which may not have reached the replicas.
    redis.call('SET', cmd_key, rec, 'KEEPTTL')
    return cjson.decode(rec)
  end
end
local function done(reply)
  if cmd_key ~= '' then
    redis.call('SET', cmd_key, cjson.encode(reply), 'EX', cmd_ttl)
    if ran_key ~= '' then
      redis.call('SET', ran_key, '1', 'EX', cmd_ttl)
    end
  end
  return reply
end
