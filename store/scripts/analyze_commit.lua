-- analyze_commit: add one batch's counts and move the bookmark, in one
-- atomic step that only happens if nobody moved the bookmark since the
-- batch was read (compare and set), then trim consumed entries (doc/protocol.md, Job logs).
-- A crash before this step loses nothing; after it, nothing is counted
-- twice.
--
-- KEYS[1] job hash (the ident)   KEYS[2] its log (IDENT_log)
-- ARGV[1] last_analyzed_log_entry as it was when the batch was read
--         ("" = none)
-- ARGV[2] the new bookmark: the score of the batch's last entry (ARGV[1]
--         when the batch was empty)
-- ARGV[3 .. 9] counts to add to r1xx, r2xx, r3xx, r4xx, r5xx, runk,
--         error_count (one HINCRBY each)
-- ARGV[10] trim_after: trim once more than this many consumed entries remain
--          (a finished job's consumed entries are trimmed at once)
-- ARGV[11] "1" to trim only up to min(analyzed, last_broadcasted_log_entry)
-- ARGV[12] the stream's lag bound (with ARGV[11] = "1"; "0" = none): when
--          more than this many analyzed entries were not broadcast, trim
--          anyway, keeping only the newest ARGV[12] of them for the stream
-- A KEYS of the wrong type, or a count field that is not an integer:
-- an error, before any write.
-- Returns {status, entries trimmed, trimmed up to, entries the stream
-- skipped (trimmed before they were broadcast)}: status 1 when committed,
-- 0 when the bookmark moved (nothing written: read again), -1 when the job
-- record does not exist (nothing written: HINCRBY must not re-create an
-- expired job).
local e = expects(KEYS[1], 'hash', KEYS[2], 'zset')
if e then return e end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, 0, 0, 0}
end
local h = redis.call('HMGET', KEYS[1], 'last_analyzed_log_entry',
  'last_broadcasted_log_entry', 'finished_at', 'last_trimmed_log_entry')
if (h[1] or '') ~= ARGV[1] then
  return {0, 0, 0, 0}
end
if ARGV[2] ~= ARGV[1] then
  local fields = {'r1xx', 'r2xx', 'r3xx', 'r4xx', 'r5xx', 'runk', 'error_count'}
  e = not_integer(KEYS[1], fields)
  if e then return e end
  for i = 1, 7 do
    redis.call('HINCRBY', KEYS[1], fields[i], ARGV[2 + i])
  end
  redis.call('HSET', KEYS[1], 'last_analyzed_log_entry', ARGV[2])
end

local upto = tonumber(ARGV[2]) or 0
local broadcast = tonumber(h[2]) or 0
local lastTrimmed = tonumber(h[4]) or 0
local skipped = 0
if ARGV[11] == '1' and broadcast < upto then
  local bound = tonumber(ARGV[12]) or 0
  if bound > 0 and upto - broadcast > bound then
    -- The stream is stalled or far behind: never let the log grow past the
    -- bound. What gets trimmed unbroadcast is counted as skipped.
    upto = upto - bound
    skipped = upto - math.max(broadcast, lastTrimmed)
    if skipped < 0 then skipped = 0 end
  else
    upto = broadcast
  end
end
-- Scores are consecutive (HINCRBY log_score), so the consumed entries still
-- present number upto - last_trimmed, as upstream's trimmer counted them;
-- no ZCOUNT, which miniredis answers by sorting the whole log.
local present = upto - lastTrimmed
local trimmed = 0
if upto > 0 and present > 0 then
  if present > tonumber(ARGV[10]) or h[3] or skipped > 0 then
    trimmed = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', upto)
    redis.call('HSET', KEYS[1], 'last_trimmed_log_entry', string.format('%.17g', upto))
  else
    skipped = 0
  end
else
  skipped = 0
end
return {1, trimmed, upto, skipped}
