-- take: the one take rule (doc/pipeline-api.md, The take rule). A
-- pipeline API key (and so the bridge, and the simulator's API mode)
-- takes a job in this one step, so no two pipelines take one job and no
-- rule can be bypassed by a race. The effect of a take is a direct
-- pipeline's (doc/protocol.md, What a pipeline does, step 2), plus the
-- ident in the key's held set.
--
-- The rules, in order:
--   1. a paused queue (a field of KEYS[4] named after it, or "all") gives
--      nothing;
--   2. per-user running limit (ARGV[6] > 0): a job whose queuing nick
--      already has that many jobs in `working` is skipped (the nick is
--      the origin record's `nick`, folded with the IRC server's
--      CASEMAPPING when queued; for a job without one, `started_by`
--      folded here with ARGV[8]); an operator's job is exempt when the
--      origin record says `op` = 1 and ARGV[7] is "1";
--   3. avoid rules: a job whose URL's host is, or is below, a domain in
--      KEYS[6] (set by operators) or KEYS[7] (set by the pipeline's own
--      report) is skipped;
--   4. targeted only (KEYS[5] field targeted_only = "1"): only pending:NAME
--      queues are tried;
--   5. the queues in the order given (KEYS[10 ..]), each from its head
--      (the right end).
-- A skipped job keeps its place. At most ARGV[9] jobs of each queue are
-- examined by one take (skipped or taken): a queue that stops at the
-- bound does not stop the scan of the next one (pending:NAME, which
-- anyone can fill with !ao --pipeline=NAME, cannot shadow the others);
-- when the bound stopped a queue's scan the reply says so.
--
-- KEYS[1] working   KEYS[2] archivebot:pipeline_key:NAME:jobs (held set)
-- KEYS[3] archivebot:pipeline_keys   KEYS[4] archivebot:paused (hash)
-- KEYS[5] archivebot:pipeline_key:NAME:rules (hash)
-- KEYS[6] archivebot:pipeline_key:NAME:avoid (set)
-- KEYS[7] archivebot:pipeline_key:NAME:avoid_self (set)
-- KEYS[8] archivebot:pipeline_key:NAME:take_ids (hash: take_id -> IDENT "\n" QUEUE)
-- KEYS[9] archivebot:pipeline_key:NAME:take_ids_at (sorted set: take_id -> when)
-- KEYS[10 ..] the queues, in the order to try
-- ARGV[1] started_at (w/ frac)   ARGV[2] the key's pipeline record key
-- ARGV[3] the key name   ARGV[4] its public key as the node verified it
-- ARGV[5] the updates channel: the ident is published there on a take
-- ARGV[6] per-user running limit (0: off)   ARGV[7] "1": ops exempt
-- ARGV[8] casemapping for nicks without a folded one: rfc1459, strict-rfc1459 or ascii
-- ARGV[9] the most jobs one take examines
-- ARGV[10] the take's take_id ('' for none)   ARGV[11] how long a take_id
-- is remembered (seconds)   ARGV[12] the most take_ids remembered per key
-- Returns {'job', hit, skipped, queue, ident, field, value, ...} (the
-- record after the take), {'none', hit, skipped} when nothing could be
-- taken, or {'revoked'} (nothing written) when the key is no longer
-- registered with that public key. hit is 1 when the scan bound stopped
-- the scan; skipped is how many jobs a rule skipped.
--
-- A take with a take_id (doc/pipeline-api.md, Take a job: a lost answer)
-- is idempotent: the take_id and the job it took are remembered for the
-- key (KEYS[8], KEYS[9]) for ARGV[11] seconds, at most ARGV[12] of them
-- (the oldest are forgotten first). A take whose take_id is remembered,
-- and whose job the key still holds (the ident in the held set and in
-- `working`, the record a job hash with the key's pipeline_id, neither
-- finished nor failed), answers
-- {'replay', 0, 0, queue, ident, field, value, ...}: that job again, as
-- it is now, and nothing is taken, written or published (no rule is
-- applied again: the job was taken under them). A take_id whose job the
-- key no longer holds (it ended, was failed, requeued or rerouted) takes
-- as any take, and is remembered with the new job.
-- An ident whose record is gone is taken out of the queue and the next
-- one is tried; one that is not a hash is moved to working, as a direct
-- pipeline's failed HSET leaves it (the start scan reports it).
if not typed(KEYS[1], 'list') or not typed(KEYS[2], 'set') or not typed(KEYS[3], 'hash')
  or not typed(KEYS[4], 'hash') or not typed(KEYS[5], 'hash') or not typed(KEYS[6], 'set')
  or not typed(KEYS[7], 'set') or not typed(KEYS[8], 'hash') or not typed(KEYS[9], 'zset') then
  return redis.error_reply('WRONGTYPE working, the held set, the keys, the pauses, the rules or the take ids are not a list/set/hash/zset')
end
if redis.call('HGET', KEYS[3], ARGV[3]) ~= ARGV[4] then
  return {'revoked'}
end

local take_id = ARGV[10] or ''
local now = tonumber(ARGV[1])
local id_ttl = tonumber(ARGV[11]) or 600
local id_cap = tonumber(ARGV[12]) or 1000

-- record(ident, queue) remembers the take_id's job, forgetting the
-- oldest take_ids past the cap; both keys expire id_ttl after the last
-- take, so an idle key keeps none.
local function record(ident, queue)
  redis.call('HSET', KEYS[8], take_id, ident .. '\n' .. queue)
  redis.call('ZADD', KEYS[9], ARGV[1], take_id)
  local n = redis.call('ZCARD', KEYS[9])
  if n > id_cap then
    local old = redis.call('ZRANGE', KEYS[9], 0, n - id_cap - 1)
    redis.call('HDEL', KEYS[8], unpack(old))
    redis.call('ZREMRANGEBYRANK', KEYS[9], 0, n - id_cap - 1)
  end
  redis.call('EXPIRE', KEYS[8], math.ceil(id_ttl))
  redis.call('EXPIRE', KEYS[9], math.ceil(id_ttl))
end

local function respond(kind, queue, ident, hit, skipped)
  local out = redis.call('HGETALL', ident)
  table.insert(out, 1, ident)
  table.insert(out, 1, queue)
  table.insert(out, 1, skipped)
  table.insert(out, 1, hit)
  table.insert(out, 1, kind)
  return out
end

if take_id ~= '' then
  -- Forget take_ids past their time (a bounded batch per take; the
  -- score check below covers the rest).
  local old = redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', '(' .. (now - id_ttl), 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('HDEL', KEYS[8], unpack(old))
    redis.call('ZREM', KEYS[9], unpack(old))
  end
  local rec = redis.call('HGET', KEYS[8], take_id)
  local at = tonumber(redis.call('ZSCORE', KEYS[9], take_id))
  if rec and at and at >= now - id_ttl then
    local ident, queue = string.match(rec, '^(.-)\n(.*)$')
    if ident and redis.call('SISMEMBER', KEYS[2], ident) == 1
      and redis.call('TYPE', ident)['ok'] == 'hash' then
      local f = redis.call('HMGET', ident, 'pipeline_id', 'finished_at', 'url', 'failed')
      if f[1] == ARGV[2] and not f[2] and f[3] and f[4] ~= 'true'
        and redis.call('LPOS', KEYS[1], ident) then
        return respond('replay', queue, ident, 0, 0)
      end
    end
  end
end

local function taken(queue, ident, hit, skipped)
  redis.call('HSET', ident, 'started_at', ARGV[1], 'pipeline_id', ARGV[2])
  redis.call('SADD', KEYS[2], ident)
  redis.call('PUBLISH', ARGV[5], ident)
  if take_id ~= '' then
    record(ident, queue)
  end
  return respond('job', queue, ident, hit, skipped)
end

local all_paused = redis.call('HEXISTS', KEYS[4], 'all') == 1
local targeted = redis.call('HGET', KEYS[5], 'targeted_only') == '1'
local limit = tonumber(ARGV[6]) or 0
local exempt = ARGV[7] == '1'
local scan_max = tonumber(ARGV[9]) or 1000

local avoid = {}
local avoiding = false
for k = 6, 7 do
  for _, d in ipairs(redis.call('SMEMBERS', KEYS[k])) do
    avoid[d] = true
    avoiding = true
  end
end

local function fold(nick)
  nick = string.lower(nick)
  if ARGV[8] == 'ascii' then
    return nick
  end
  nick = string.gsub(nick, '[%[%]\\]', {['['] = '{', [']'] = '}', ['\\'] = '|'})
  if ARGV[8] ~= 'strict-rfc1459' then
    nick = string.gsub(nick, '~', '^')
  end
  return nick
end

-- owner(ident) is the folded nick that queued ident and whether it was
-- queued by an operator.
local function owner(ident)
  local o = {}
  local ok, r = pcall(redis.call, 'HMGET', K.origin_prefix .. ident, 'nick', 'op')
  if ok then o = r end
  local nick = o[1]
  if not nick then
    local ok2, sb = pcall(redis.call, 'HGET', ident, 'started_by')
    nick = ok2 and sb and fold(sb) or ''
  end
  return nick, o[2] == '1'
end

local running = {}
if limit > 0 then
  for _, ident in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    local nick = owner(ident)
    if nick ~= '' then
      running[nick] = (running[nick] or 0) + 1
    end
  end
end

-- host(url): the lower-cased host of an URL (no user info, no port, no
-- trailing dot). Job URLs are normalized when queued, so an
-- internationalized host is already in its ASCII (Punycode) form.
local function host(url)
  local h = string.match(url or '', '^[%a][%w+.-]*://([^/?#]*)')
  if not h then return nil end
  h = string.gsub(h, '^.*@', '')
  if string.sub(h, 1, 1) == '[' then return string.lower(h) end
  h = string.gsub(h, ':%d*$', '')
  h = string.gsub(h, '%.$', '')
  return string.lower(h)
end

local function avoided(h)
  if not h then return false end
  while true do
    if avoid[h] then return true end
    local dot = string.find(h, '.', 1, true)
    if not dot then return false end
    h = string.sub(h, dot + 1)
  end
end

local rules = limit > 0 or avoiding
local examined, skipped, hit = 0, 0, 0
for i = 10, #KEYS do
  local q = KEYS[i]
  local named = string.sub(q, 1, #K.named_prefix) == K.named_prefix
  local paused = all_paused or redis.call('HEXISTS', KEYS[4], q) == 1
  if not paused and (named or not targeted) and redis.call('TYPE', q)['ok'] == 'list' then
    examined = 0 -- the bound is each queue's
    if not rules then
      -- No rule can skip a job: the head is taken, as a direct pipeline does.
      while examined < scan_max do
        local ident = redis.call('RPOPLPUSH', q, KEYS[1])
        if not ident then break end
        examined = examined + 1
        local t = redis.call('TYPE', ident)['ok']
        if t == 'none' then
          redis.call('LREM', KEYS[1], 1, ident)
        elseif t == 'hash' then
          return taken(q, ident, hit, skipped)
        end
      end
    else
      -- kept: how many jobs, counted from the head, stay where they are.
      local kept = 0
      local chunk = 16
      local done = false
      while not done do
        local batch = redis.call('LRANGE', q, -(kept + chunk), -(kept + 1))
        if #batch == 0 then break end
        if #batch < chunk then done = true end
        for b = #batch, 1, -1 do
          if examined >= scan_max then
            hit = 1
            done = true
            break
          end
          examined = examined + 1
          local ident = batch[b]
          local t = redis.call('TYPE', ident)['ok']
          if t == 'none' then
            redis.call('LREM', q, -1, ident)
          elseif t ~= 'hash' then
            redis.call('LREM', q, -1, ident)
            redis.call('LPUSH', KEYS[1], ident)
          else
            local skip = false
            if limit > 0 then
              local nick, op = owner(ident)
              if nick ~= '' and not (exempt and op) and (running[nick] or 0) >= limit then
                skip = true
              end
            end
            if not skip and avoiding and avoided(host(redis.call('HGET', ident, 'url'))) then
              skip = true
            end
            if skip then
              kept = kept + 1
              skipped = skipped + 1
            else
              redis.call('LREM', q, -1, ident)
              redis.call('LPUSH', KEYS[1], ident)
              return taken(q, ident, hit, skipped)
            end
          end
        end
        chunk = math.min(chunk * 4, 1024)
      end
    end
    if examined >= scan_max then
      hit = 1
    end
  end
end
return {'none', hit, skipped}
