-- api_update: the batched write of a held job's counters (at most one per
-- job per second; doc/pipeline-api.md, Update a held job).
--
-- KEYS[1] the job record   KEYS[2] the key's held set
-- ARGV[1] the key's pipeline record key
-- ARGV[2] n, then n field/increment pairs (HINCRBY)
-- then m, then m field/value pairs (HSET)
-- Returns {1, ''} written; {0, why} not held (nothing written).
local why = held_check()
if why then return {0, why} end
local n = tonumber(ARGV[2])
local i = 3
for _ = 1, n do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local m = tonumber(ARGV[i])
i = i + 1
for _ = 1, m do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
return {1, ''}
