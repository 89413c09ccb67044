-- read_log.lua: read a job's log without loading oversized entries into
-- the node (what pipelines write is untrusted; see store/logentry.go).
-- Read-only.
-- KEYS[1]: IDENT_log (sorted set)
-- ARGV[1]: "after" or "tail"
-- ARGV[2]: after: the bookmark (entries scored above it); tail: unused
-- ARGV[3]: the most entries to read
-- ARGV[4]: the largest entry returned whole, in bytes
-- ARGV[5]: the most bytes of entries returned (at least one entry)
-- Returns -1 when KEYS[1] is not a sorted set; else a flat array
-- [member, score, member, score, …] in score order, where a member longer
-- than ARGV[4] is replaced by its length (an integer).
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {} end
if t ~= 'zset' then return -1 end
local r
if ARGV[1] == 'tail' then
  r = redis.call('ZRANGE', KEYS[1], -tonumber(ARGV[3]), -1, 'WITHSCORES')
else
  r = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
end
local cap, budget = tonumber(ARGV[4]), tonumber(ARGV[5])
local out, used = {}, 0
for i = 1, #r, 2 do
  local m = r[i]
  local n = string.len(m)
  if n > cap then
    m = n
    n = 0
  end
  if used + n > budget and #out > 0 then break end
  used = used + n
  out[#out + 1] = m
  out[#out + 1] = r[i + 1]
end
return out
