-- resume: end a pause (doc/protocol.md, Paused queues).
--
-- KEYS[1] archivebot:paused
-- KEYS[2k], KEYS[2k+1] a queue and its list aside, archivebot:paused:QUEUE
-- ARGV[1] the queue name, or "all"
-- KEYS[#KEYS] for "all": the queue index, archivebot:queues
-- Returns 1 resumed; -1 it is not paused; -2 it is paused, but so is
-- every queue ("all" must be resumed first); -3 ("all") the index names a
-- queue not given. Nothing is written unless 1 is returned.
--
-- Each list aside moves back under its queue's name in the same order;
-- jobs found under the queue's name (queued by something that ignored
-- the pause) are newer and stay at the back (the left end). A queue that
-- is still paused on its own stays aside when "all" is resumed.
local bad = expect(KEYS[1], 'hash')
if bad then return bad end
-- For "all", the last KEY is the queue index (archivebot:queues): the
-- queues given must be every queue it names now, or nothing is done and
-- -3 tells the caller to list them again (a queue created between the
-- caller's read of the index and this script would stay open).
local last = #KEYS
if ARGV[1] == 'all' then
  local covered
  last, covered = index_covered(last)
  if not covered then
    return -3
  end
end
for i = 2, last do
  bad = expect(KEYS[i], 'list')
  if bad then return bad end
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  if ARGV[1] ~= 'all' and redis.call('HEXISTS', KEYS[1], 'all') == 1 then
    return -2
  end
  return -1
end
if ARGV[1] ~= 'all' and redis.call('HEXISTS', KEYS[1], 'all') == 1 then
  return -2
end
redis.call('HDEL', KEYS[1], ARGV[1])
for i = 2, last - 1, 2 do
  local q, aside = KEYS[i], KEYS[i + 1]
  if (ARGV[1] == q or redis.call('HEXISTS', KEYS[1], q) == 0) and redis.call('EXISTS', aside) == 1 then
    if redis.call('EXISTS', q) == 0 then
      redis.call('RENAME', aside, q)
    else
      local items = redis.call('LRANGE', aside, 0, -1)
      for j = 1, #items do
        redis.call('RPUSH', q, items[j])
      end
      redis.call('DEL', aside)
    end
  end
end
return 1
