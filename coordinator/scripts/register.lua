-- register: create a job record and queue it in one atomic step.
--
-- KEYS[1] job hash (the ident)   KEYS[2] ignore set   KEYS[3] queue
-- KEYS[4] the queue the pending limit counts ("pending")
-- KEYS[5] archivebot:queues, the index of named queues (KEYS[3] is added
--         when it is a pending:NAME queue)
-- ARGV[1] pending limit (0 = no limit)
-- ARGV[2] n, the number of field/value pairs that follow
-- ARGV[3 .. 2+2n] field, value, ...   (queued_at included)
-- ARGV[3+2n .. #ARGV-2] ignore patterns
-- ARGV[#ARGV - 1], ARGV[#ARGV] the command record (cmdrecord.lua, prepended):
-- a change made under a recorded command returns its recorded reply.
-- Returns 1 when created, -1 when the job record already exists, -2 when
-- the pending limit is reached. Nothing is written unless 1 is returned.
--
-- A Redis script is not rolled back when a command fails half-way, so
-- every key's type is checked before the first write: a wrong-typed key
-- is an error with nothing written, never a record without its queue entry.
local function expect(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return redis.error_reply('WRONGTYPE ' .. key .. ' is a ' .. t .. ', not a ' .. want)
  end
end
local bad = expect(KEYS[2], 'set') or expect(KEYS[3], 'list') or expect(KEYS[4], 'list')
  or expect(KEYS[5], 'set')
if bad then
  return bad
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
local limit = tonumber(ARGV[1])
if limit > 0 and redis.call('LLEN', KEYS[4]) >= limit then
  return -2
end
local n = tonumber(ARGV[2])
local fields = {}
for i = 3, 2 + 2 * n do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], unpack(fields))
local first = 3 + 2 * n
local last = #ARGV - 2 -- the command record takes the last two
if first <= last then
  local patterns = {}
  for i = first, last do
    patterns[#patterns + 1] = ARGV[i]
    if #patterns == 500 then
      redis.call('SADD', KEYS[2], unpack(patterns))
      patterns = {}
    end
  end
  if #patterns > 0 then
    redis.call('SADD', KEYS[2], unpack(patterns))
  end
end
redis.call('LPUSH', KEYS[3], KEYS[1])
if string.sub(KEYS[3], 1, 8) == 'pending:' then
  redis.call('SADD', KEYS[5], KEYS[3])
end
return done(1)
