-- lib: the prologue of every script. scripts.go prepends it (after the
-- fence, and after the table K of key names it generates from keys.go),
-- so each script's source, and so its SHA1, is the same on every load.
--
-- K holds the names scripts compare against or publish to, never keys
-- they read or write (those come in KEYS): K.pending, K.pending_ao,
-- K.pending_large, K.named_prefix (pending:NAME queues), K.job_events.
--
-- typed(key, want) is true when key does not exist or is a `want`, and
-- the key's type as a second value.
-- expect(key, want) is nil when typed(key, want), else the WRONGTYPE
-- error reply the script returns before its first write, since Redis does
-- not roll a script back: "WRONGTYPE KEY is a TYPE, not a WANT".
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
