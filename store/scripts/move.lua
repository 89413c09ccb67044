-- move: move a queued job within its queue or to another queue of the
-- same kind, in one atomic step (!move; doc/protocol.md, Queues).
--
-- KEYS[1] job hash   KEYS[2] archivebot:history:IDENT
-- KEYS[3] archivebot:origin:IDENT   KEYS[4] archivebot:queues
-- KEYS[5] the target queue (ARGV[1] "queue"; otherwise unused)
-- KEYS[6] archivebot:paused   KEYS[7] archivebot:paused:QUEUE of KEYS[5]
-- KEYS[8 ..] every queue the job may wait in, each followed by the list
--            it waits in while that queue is paused (doc/protocol.md,
--            Paused queues): a job moves within whichever holds it, and a
--            move to a paused queue goes to its paused list
-- ARGV[1] "front" (next to run: the right end), "back" (last to run: the
--         left end) or "queue" (to the back of KEYS[5])
-- ARGV[2] the "moved" history entry without its end: the script appends
--         the source queue and closes it (history.lua, prepended)
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended)
-- Returns {code, queue}: 1 moved (queue = where it was); 0 no such job;
-- -1 finished; -2 a pipeline has taken it; -3 the key is not a job;
-- -4 the target queue is of another kind (recursive jobs stay in pending,
-- pending-large and pending:NAME; !ao jobs in pending-ao and pending:NAME);
-- -5 the job is already in the target queue; -6 the job is in no queue.
-- Nothing is written unless 1 is returned.
local t = job_type(KEYS[1]) -- a ghost is 'none'
if t ~= 'hash' then
  return t == 'none' and {0, ''} or {-3, ''}
end
local bad = history_bad(KEYS[2]) or expect(KEYS[3], 'hash') or expect(KEYS[4], 'set')
  or expect(KEYS[5], 'list') or expect(KEYS[6], 'hash') or expect(KEYS[7], 'list')
if bad then
  return bad
end
local f = redis.call('HMGET', KEYS[1], 'finished_at', 'failed', 'started_at', 'pipeline_id', 'fetch_depth')
if f[1] or f[2] == 'true' then
  return {-1, ''}
end
if f[3] or f[4] then
  return {-2, ''}
end
local from = list_holding(8)
if not from then
  return {-6, ''}
end
local where = ARGV[1]
local to = from
if where == 'queue' then
  to = KEYS[5]
  if to == queue_name(from) then
    return {-5, queue_name(from)}
  end
  local shallow = f[5] == 'shallow'
  local named = string.sub(to, 1, #K.named_prefix) == K.named_prefix
  if not named and ((shallow and to ~= K.pending_ao) or (not shallow and to == K.pending_ao)) then
    return {-4, queue_name(from)}
  end
  to = push_target(KEYS[6], KEYS[5], KEYS[7])
end
redis.call('LREM', from, 1, KEYS[1])
if where == 'front' then
  redis.call('RPUSH', to, KEYS[1])
else
  redis.call('LPUSH', to, KEYS[1])
end
local tq = queue_name(to)
if string.sub(tq, 1, #K.named_prefix) == K.named_prefix then
  redis.call('SADD', KEYS[4], tq)
end
redis.call('HSET', KEYS[3], 'queue', tq)
history(KEYS[2], ARGV[2] .. cjson.encode(queue_name(from)) .. '}}')
return done({1, queue_name(from)})
