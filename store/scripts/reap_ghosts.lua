-- reap_ghosts: remove ghost job hashes (doc/protocol.md, Which record
-- speaks for a job): hashes without `url`, re-created by a pipeline's late
-- writes (heartbeat, counters, log) after their job ended, with the log
-- those writes re-created. Ghosts come from jobs that ended while a
-- pipeline still held them (failed, mostly): such jobs are in the index of
-- finished jobs; a ghost may also sit in `working`.
--
-- KEYS[1] archivebot:finished (sorted set of idents)   KEYS[2] working
-- ARGV[1] the most idents of KEYS[1] looked at, newest first
-- ARGV[2] the suffix of a job's log key ("_log")
--
-- Job hashes are read by the idents found, as reap.lua does. Members that
-- are no hash (another program's keys) are left alone; those of `working`
-- (which reap.lua skips) are counted.
-- Returns {removed, bad, first}: the idents whose ghost was removed, the
-- number of members of `working` that are not hashes, and the first 3.
local e = expects(KEYS[1], 'zset', KEYS[2], 'list')
if e then return e end
local removed = {}
local seen = {}
local bad, first = 0, {}
local function look(ident, working)
  if seen[ident] then return end
  seen[ident] = true
  local t = redis.call('TYPE', ident)['ok']
  if t == 'hash' and redis.call('HEXISTS', ident, 'url') == 0 then
    redis.call('DEL', ident, ident .. ARGV[2])
    removed[#removed + 1] = ident
  elseif working and t ~= 'hash' and t ~= 'none' then
    bad = bad + 1
    if #first < 3 then first[#first + 1] = ident end
  end
end
for _, ident in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  look(ident, false)
end
for _, ident in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  look(ident, true)
end
return {removed, bad, first}
