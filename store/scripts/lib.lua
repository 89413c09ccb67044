-- lib: the prologue of every script. scripts.go prepends it (after the
-- fence, and after the table K of key names it generates from keys.go),
-- so each script's source, and so its SHA1, is the same on every load.
--
-- K holds the names scripts compare against or publish to, never keys
-- they read or write (those come in KEYS): K.pending, K.pending_ao,
-- K.pending_large, K.named_prefix (pending:NAME queues), K.job_events,
-- K.origin_prefix (archivebot:origin:IDENT), K.paused_prefix (a paused
-- queue's list set aside: archivebot:paused:QUEUE).
--
-- typed(key, want) is true when key does not exist or is a `want`, and
-- the key's type as a second value.
-- expect(key, want) is nil when typed(key, want), else the WRONGTYPE
-- error reply the script returns before its first write, since Redis does
-- not roll a script back: "WRONGTYPE KEY is a TYPE, not a WANT".
-- expects(key1, want1, key2, want2, ...) is expect over each pair in
-- turn: the first error, or nil.
-- integer(v) is true when HINCRBY can add to v: an integer written the
-- way Redis writes one (no sign on 0, no leading zero, no space), short
-- enough that adding a count cannot overflow.
-- nickname(pipeline) is the nickname in a pipeline record (its key is
-- the pipeline_id a job names), or false when there is none or the key
-- is not a hash.
-- forget_gone(set, working) removes from set the idents that are not keys
-- of the table working (the reaper's and the start scan's "announced"
-- sets follow `working`).
-- job_type(key) is the key's type, except 'none' for a ghost: a hash
-- without `url`, which a pipeline's late write re-creates after its job
-- ended (doc/protocol.md, Which record speaks for a job). Commands on jobs
-- read the job key's type through it, so a ghost is no job to them.
-- push_target and queue_name: see below.
-- not_integer(key, fields) is nil when every field of hash key that is
-- set holds an integer(), else the error reply a script returns before
-- its first HINCRBY: "ERR KEY field F is not an integer".
local function typed(key, want)
  local t = redis.call('TYPE', key)['ok']
  return t == 'none' or t == want, t
end
local function expect(key, want)
  local ok, t = typed(key, want)
  if not ok then
    return redis.error_reply('WRONGTYPE ' .. key .. ' is a ' .. t .. ', not a ' .. want)
  end
end
local function expects(...)
  local a = {...}
  for i = 1, #a, 2 do
    local e = expect(a[i], a[i + 1])
    if e then return e end
  end
end
local function integer(v)
  return v == '0' or (#v <= 18 and string.match(v, '^%-?[1-9]%d*$') ~= nil)
end
local function not_integer(key, fields)
  local v = redis.call('HMGET', key, unpack(fields))
  for i, f in ipairs(fields) do
    if v[i] and not integer(v[i]) then
      return redis.error_reply('ERR ' .. key .. ' field ' .. f .. ' is not an integer')
    end
  end
end
local function job_type(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'hash' and redis.call('HEXISTS', key, 'url') == 0 then
    return 'none'
  end
  return t
end
local function nickname(pipeline)
  local ok, n = pcall(redis.call, 'HGET', pipeline, 'nickname')
  return ok and n
end
local function forget_gone(set, working)
  for _, ident in ipairs(redis.call('SMEMBERS', set)) do
    if not working[ident] then
      redis.call('SREM', set, ident)
    end
  end
end
-- push_target(paused, queue, aside) is where a job queued in queue goes:
-- aside (archivebot:paused:QUEUE) while queue, or every queue, is paused
-- in the hash paused (doc/protocol.md, Paused queues), else queue.
local function push_target(paused, queue, aside)
  if redis.call('HEXISTS', paused, queue) == 1 or redis.call('HEXISTS', paused, 'all') == 1 then
    return aside
  end
  return queue
end
-- queue_name(key) is the queue a list key stands for: the queue itself,
-- or the queue whose paused list key is.
local function queue_name(key)
  if string.sub(key, 1, #K.paused_prefix) == K.paused_prefix then
    return string.sub(key, #K.paused_prefix + 1)
  end
  return key
end

-- list_holding returns the first of KEYS[first ..] that holds KEYS[1] (a
-- key of another type is skipped), or nil: where a job waits, for the
-- scripts that move it (move, reroute).
local function list_holding(first)
  for k = first, #KEYS do
    local ok, pos = pcall(redis.call, 'LPOS', KEYS[k], KEYS[1])
    if ok and pos then
      return KEYS[k]
    end
  end
  return nil
end

-- index_covered: for pause and resume of "all", KEYS[last] is the queue
-- index and KEYS[2k] the queues the caller named; it returns the last key
-- before the index and whether every queue in the index was named.
local function index_covered(last)
  local index = KEYS[last]
  last = last - 1
  if redis.call('TYPE', index)['ok'] == 'set' then
    local given = {}
    for i = 2, last - 1, 2 do
      given[KEYS[i]] = true
    end
    for _, q in ipairs(redis.call('SMEMBERS', index)) do
      if not given[q] then
        return last, false
      end
    end
  end
  return last, true
end
