-- relay_mark: the leader's firehose relays what it streams to every node
-- (doc/architecture.md, The follower's stream): append the batch's
-- messages to the relay stream, then move the broadcast bookmarks of its
-- jobs as broadcast.lua does, in one script, so that the bookmarks move
-- exactly when the relay has the entries (a new leader resumes from the
-- bookmarks: nothing is skipped, nothing relayed twice). A node that lost
-- the lease writes neither (the fence).
--
-- KEYS[1]    the relay stream (archivebot:stream_relay)
-- KEYS[2]    its message counter (archivebot:stream_relay:seq): each
--            message gets the next number as field "n", so a reader
--            knows how many it missed
-- KEYS[3..]  the hashes of the jobs whose bookmarks move
-- ARGV[1]    the stream's approximate length bound (XADD MAXLEN ~)
-- ARGV[2]    n, the number of messages
-- ARGV[3..2+n]  the messages, appended in order as field "m"
-- then per job of KEYS[3..]: the bookmark as read ("" = none), the score
-- of the last entry sent, now (float UNIX seconds)
-- Returns the IDs of the appended messages followed by one integer per
-- job: 1 moved, 0 the bookmark had moved, -1 the job is gone (or not a
-- hash).
local n = tonumber(ARGV[2])
local out = {}
for i = 1, n do
  local seq = redis.call('INCR', KEYS[2])
  out[#out + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'm', ARGV[2 + i], 'n', seq)
end
local a = 3 + n
for k = 3, #KEYS do
  local key = KEYS[k]
  if redis.call('TYPE', key).ok ~= 'hash' then
    out[#out + 1] = -1
  else
    local cur = redis.call('HGET', key, 'last_broadcasted_log_entry') or ''
    if cur ~= ARGV[a] then
      out[#out + 1] = 0
    else
      redis.call('HSET', key, 'last_broadcasted_log_entry', ARGV[a + 1], 'ts', ARGV[a + 2])
      out[#out + 1] = 1
    end
  end
  a = a + 3
end
return out
