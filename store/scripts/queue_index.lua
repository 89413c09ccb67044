-- queue_index: read the index of named queues (archivebot:queues), adding
-- the names given and pruning what is no longer a queue, in one step.
--
-- Pipelines empty queues with RPOPLPUSH outside our scripts, and other
-- programs may leave a key of another type under pending:*, so every member
-- is checked here: a member that is not a non-empty list leaves the index
-- (register.lua adds it again when a job is queued there).
--
-- KEYS[1] archivebot:queues (set)
-- ARGV[1..] names to add if they are non-empty lists (a SCAN of pending:*
--           when the index is rebuilt; none on an ordinary read)
-- Returns {name, length, name, length, ...} of the non-empty named queues,
-- sorted by name. A wrong-typed index is an error.
local bad = expect(KEYS[1], 'set')
if bad then
  return bad
end
local names = redis.call('SMEMBERS', KEYS[1])
local seen = {}
for _, n in ipairs(names) do
  seen[n] = true
end
for i = 1, #ARGV do
  if not seen[ARGV[i]] then
    seen[ARGV[i]] = true
    names[#names + 1] = ARGV[i]
  end
end
table.sort(names)
local out = {}
for _, n in ipairs(names) do
  local len = 0
  if redis.call('TYPE', n)['ok'] == 'list' then
    len = redis.call('LLEN', n)
  end
  if len > 0 then
    redis.call('SADD', KEYS[1], n)
    out[#out + 1] = n
    out[#out + 1] = len
  else
    redis.call('SREM', KEYS[1], n)
  end
end
return out
