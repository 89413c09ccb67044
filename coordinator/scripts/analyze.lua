-- analyze: count one batch of a job's new log entries and move the
-- bookmark, then trim consumed entries (SPEC §5.4). Counting and bookmark
-- are one atomic step, so a crash can never count an entry twice.
--
-- KEYS[1] job hash (the ident)   KEYS[2] its log (IDENT_log)
-- ARGV[1] batch size: at most this many entries are read
-- ARGV[2] trim_after: trim once more than this many consumed entries remain
-- ARGV[3] "1" to trim only up to min(analyzed, last_broadcasted_log_entry)
--
-- Entries with score > last_analyzed_log_entry are read in score order. For
-- each `download` entry the bucket of its response_code (r1xx .. r5xx, else
-- runk) is counted, and error_count when is_error is true; entries that
-- are not JSON, or only a JSON scalar, are skipped and counted as invalid.
-- Each counter gets one HINCRBY per batch. Nothing is written when the job
-- record does not exist (an expired job must not be re-created by HINCRBY).
--
-- Returns {entries read, invalid, r1xx, r2xx, r3xx, r4xx, r5xx, runk,
-- errors, bookmark, entries trimmed, trimmed up to, more (1 when the batch
-- was full)}, or {-1} when the job record does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1}
end
local h = redis.call('HMGET', KEYS[1], 'last_analyzed_log_entry',
  'last_broadcasted_log_entry', 'finished_at')
local last = tonumber(h[1]) or 0
local batch = tonumber(ARGV[1])
local entries = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. last, '+inf',
  'WITHSCORES', 'LIMIT', 0, batch)

local fields = {'r1xx', 'r2xx', 'r3xx', 'r4xx', 'r5xx', 'runk', 'error_count'}
local counts = {0, 0, 0, 0, 0, 0, 0}
local invalid = 0
local n = #entries / 2
for i = 1, #entries, 2 do
  local ok, e = pcall(cjson.decode, entries[i])
  if not ok or type(e) ~= 'table' then
    invalid = invalid + 1
  elseif e['type'] == 'download' then
    local code = tonumber(e['response_code'])
    local b = 6
    if code and code >= 100 and code < 600 then
      b = math.floor(code / 100)
    end
    counts[b] = counts[b] + 1
    local err = e['is_error']
    if err == true or err == 'true' then
      counts[7] = counts[7] + 1
    end
  end
end

if n > 0 then
  last = tonumber(entries[#entries])
  for i = 1, 7 do
    redis.call('HINCRBY', KEYS[1], fields[i], counts[i])
  end
  redis.call('HSET', KEYS[1], 'last_analyzed_log_entry', string.format('%.0f', last))
end

local upto = last
if ARGV[3] == '1' then
  upto = math.min(upto, tonumber(h[2]) or 0)
end
local trimmed = 0
if upto > 0 then
  local present = redis.call('ZCOUNT', KEYS[2], '-inf', upto)
  if present > tonumber(ARGV[2]) or (h[3] and present > 0) then
    trimmed = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', upto)
    redis.call('HSET', KEYS[1], 'last_trimmed_log_entry', string.format('%.0f', upto))
  end
end

local more = 0
if n == batch then
  more = 1
end
return {n, invalid, counts[1], counts[2], counts[3], counts[4], counts[5],
  counts[6], counts[7], last, trimmed, upto, more}
