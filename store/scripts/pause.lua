-- pause: pause a queue, or every queue, in one step (doc/protocol.md,
-- Paused queues).
--
-- KEYS[1] archivebot:paused (hash: queue or "all" -> JSON {by, at, reason})
-- KEYS[2k], KEYS[2k+1] a queue to set aside and where it waits:
--   archivebot:paused:QUEUE (the queue itself, or for "all" every queue)
-- ARGV[1] the queue name, or "all"   ARGV[2] the pause record
-- KEYS[#KEYS] for "all": the queue index, archivebot:queues
-- Returns 1 paused; -1 it is already paused; -2 every queue is already
-- paused; -3 ("all") the index names a queue not given. Nothing is
-- written unless 1 is returned.
--
-- The queue's list is renamed aside, so a pipeline that takes straight
-- from Redis finds no list under the queue's name (and upstream's
-- pipelines only look at pending* names); jobs queued while it is paused
-- go to the list aside (push_target, lib.lua).
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
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return -1
end
if redis.call('HEXISTS', KEYS[1], 'all') == 1 then
  return -2
end
for i = 2, last - 1, 2 do
  local q, aside = KEYS[i], KEYS[i + 1]
  if redis.call('EXISTS', q) == 1 then
    if redis.call('EXISTS', aside) == 0 then
      redis.call('RENAME', q, aside)
    else
      -- A list left aside (only by hand): the queue's jobs are the newer,
      -- so they go to its left end, in order.
      local items = redis.call('LRANGE', q, 0, -1)
      for j = #items, 1, -1 do
        redis.call('LPUSH', aside, items[j])
      end
      redis.call('DEL', q)
    end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
