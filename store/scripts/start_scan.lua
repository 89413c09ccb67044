-- start_scan: notice the jobs pipelines have taken since the last scan, in
-- one atomic step and one round trip (doc/protocol.md, Start notices).
-- Nothing is published when a pipeline takes a job: a job counts as
-- started once it is in `working` and has `started_at` or `pipeline_id`.
--
-- KEYS[1] working   KEYS[2] archivebot:started (idents already seen)
-- KEYS[3] archivebot:start_notifications
-- KEYS[4] archivebot:start_baseline (string: when the first scan ran)
-- ARGV[1] now (UNIX seconds with fraction, a JSON number)
-- ARGV[2] "1" when start notices are on by default, "0" when off
-- ARGV[3] history key prefix   ARGV[4] origin key prefix
--
-- For each newly started job, in the same step: the ident is added to
-- KEYS[2], a "started" entry is appended to its history (history.lua,
-- prepended) and, unless it opted out, a notice document
-- {"ident","url","started_by","started_in","pipeline_id","pipeline"} is
-- RPUSHed to KEYS[3]. Whether a job wants a notice comes from its origin
-- record (`notify_start`); a job without one (queued by another program)
-- follows ARGV[2], except shallow (!ao) jobs, which get none. Idents of
-- KEYS[2] no longer in `working` are forgotten.
-- Job hashes are read by the idents found in `working`, as reap.lua does.
-- The first scan ever against this Redis (KEYS[4] absent: a new
-- deployment, or a switch-over from upstream's node) takes a baseline:
-- the jobs already in `working` were running before this node first
-- started, so they are marked seen and get their history entry, but no
-- notice ("has started" would be untrue, and 300 of them would take the
-- channel for minutes); KEYS[4] is then set to ARGV[1].
-- Returns {started, notices, working, skipped, baseline}: how many jobs
-- were seen starting, how many notices were queued, the idents read from
-- `working` (so the caller needs no second read), the idents of `working`
-- that cannot be jobs (not a hash, no url, a history key of another type),
-- which are left alone and reported so the caller can log them, and how
-- many jobs the baseline left unannounced.
local bad = expect(KEYS[1], 'list') or expect(KEYS[2], 'set') or expect(KEYS[3], 'list') or
  expect(KEYS[4], 'string')
if bad then
  return bad
end
local baseline = redis.call('EXISTS', KEYS[4]) == 0
local unannounced = 0
local function str(v)
  if v then return cjson.encode(v) end
  return 'null'
end
local idents = redis.call('LRANGE', KEYS[1], 0, -1)
local in_working = {}
local started, notices = 0, 0
local skipped = {}
for _, ident in ipairs(idents) do
  in_working[ident] = true
  if redis.call('SISMEMBER', KEYS[2], ident) == 0 then
    local ok, f = pcall(redis.call, 'HMGET', ident, 'url', 'started_by', 'started_in',
      'pipeline_id', 'started_at', 'fetch_depth', 'finished_at', 'failed')
    local hkey = ARGV[3] .. ident
    if not ok or not f[1] or history_bad(hkey) then
      skipped[#skipped + 1] = ident
    elseif f[4] or f[5] then
      redis.call('SADD', KEYS[2], ident)
      started = started + 1
      local nick = f[4] and nickname(f[4])
      history(hkey, '{"ts":' .. ARGV[1] .. ',"ident":' .. cjson.encode(ident) ..
        ',"event":"started","by":' .. cjson.encode(f[4] or 'pipeline') ..
        ',"detail":{"pipeline":' .. str(nick) .. ',"started_at":' .. str(f[5]) .. '}}')
      local want
      local ook, o = pcall(redis.call, 'HGET', ARGV[4] .. ident, 'notify_start')
      if ook and o then
        want = o == '1'
      else
        want = ARGV[2] == '1' and f[6] ~= 'shallow'
      end
      if want and baseline then
        unannounced = unannounced + 1
      elseif want and not f[7] and f[8] ~= 'true' then
        redis.call('RPUSH', KEYS[3], '{"ident":' .. cjson.encode(ident) .. ',"url":' .. str(f[1]) ..
          ',"started_by":' .. str(f[2]) .. ',"started_in":' .. str(f[3]) ..
          ',"pipeline_id":' .. str(f[4]) .. ',"pipeline":' .. str(nick) .. '}')
        notices = notices + 1
      end
    end
  end
end
forget_gone(KEYS[2], in_working)
if baseline then
  redis.call('SET', KEYS[4], ARGV[1])
end
return {started, notices, idents, skipped, unannounced}
