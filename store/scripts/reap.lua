-- reap: one death-timer cycle over every job in `working` (doc/protocol.md, Death timer), in
-- one round trip whatever the number of jobs.
--
-- KEYS[1] working   KEYS[2] archivebot:reaper:reported (idents whose death
--                   was announced)
-- ARGV[1] threshold: death_timer value at which a job is dead
-- ARGV[2] "1" to also return dead jobs already announced (so auto-fail can
--         retry them), "0" to return only the ones not yet announced
--
-- Job hashes are read and written by the idents found in `working`, the way
-- upstream's reaper did; they cannot be declared in KEYS without a second
-- round trip.
--
-- A job taken (`started_at` set) that has never sent a heartbeat counts
-- as heartbeat 0, so its death timer runs from the take: a pipeline that
-- takes a job and dies (or whose key is revoked) before its first
-- heartbeat is found dead after the threshold like any other, where
-- upstream's reaper skipped it for ever.
--
-- Per job, otherwise exactly as upstream: no `heartbeat` -> skip; no
-- `last_acknowledged_heartbeat` -> copy heartbeat into it; heartbeat > LAH ->
-- LAH = heartbeat, death_timer = 0; else death_timer + 1 (one HSET: a
-- death_timer that is not a finite number counts as 0, so it becomes 1, where
-- HINCRBY would fail the whole cycle). Jobs with
-- `finished_at` or `failed` are left alone. A job whose heartbeat advances
-- again is forgotten from KEYS[2], and so are idents no longer in `working`,
-- so a second death is announced again.
--
-- A KEYS of the wrong type: the WRONGTYPE error, before any write.
-- Returns a list of dead jobs, each {ident, url, started_by, started_in,
-- pipeline_id, pipeline nickname, death_timer, reported (0/1)}.
local e = expects(KEYS[1], 'list', KEYS[2], 'set')
if e then return e end
local threshold = tonumber(ARGV[1])
local include_reported = ARGV[2] == '1'
local idents = redis.call('LRANGE', KEYS[1], 0, -1)
local in_working = {}
local dead = {}
for _, ident in ipairs(idents) do
  in_working[ident] = true
  local ok, f = pcall(redis.call, 'HMGET', ident, 'heartbeat',
    'last_acknowledged_heartbeat', 'death_timer', 'finished_at', 'failed', 'started_at')
  if ok and not f[1] and f[6] then f[1] = '0' end -- taken, no heartbeat yet
  if ok and f[1] and not f[4] and f[5] ~= 'true' then
    local hb = tonumber(f[1]) or 0
    if not f[2] then
      redis.call('HSET', ident, 'last_acknowledged_heartbeat', f[1])
    elseif hb > (tonumber(f[2]) or 0) then
      redis.call('HSET', ident, 'last_acknowledged_heartbeat', f[1], 'death_timer', 0)
      if (tonumber(f[3]) or 0) >= threshold then
        redis.call('SREM', KEYS[2], ident)
      end
    else
      local n = tonumber(f[3]) or 0
      if n ~= n or n == math.huge or n == -math.huge then n = 0 end -- nan, inf
      local timer = math.floor(n) + 1
      redis.call('HSET', ident, 'death_timer', timer)
      if timer >= threshold then
        local reported = redis.call('SISMEMBER', KEYS[2], ident)
        if reported == 0 or include_reported then
          local j = redis.call('HMGET', ident, 'url', 'started_by', 'started_in', 'pipeline_id')
          local nick = j[4] and nickname(j[4])
          dead[#dead + 1] = {ident, j[1] or '', j[2] or '', j[3] or '',
            j[4] or '', nick or '', timer, reported}
        end
      end
    end
  end
end
forget_gone(KEYS[2], in_working)
return dead
