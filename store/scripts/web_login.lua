-- web_login: turn a one-time sign-in code into a dashboard session, in one
-- step (doc/web.md, Signing in and acting). The code is consumed only when
-- a session is made; a full bound leaves it unused. The caller read the
-- code and checked its MAC (a key Redis never holds); the code must still
-- carry that MAC, so a code rewritten in between makes no session. The
-- session's fields and MAC come from the caller.
--
-- KEYS[1] archivebot:web:code:ID (hash: nick, nick_key, account,
--         account_known, rank, presence, expires_ms, mac, used_ms)
-- KEYS[2] archivebot:web:session:ID (the new session)
-- KEYS[3] archivebot:web:sessions (sorted set: session id -> expiry ms)
-- KEYS[4] archivebot:web:nick:NICK_KEY (sorted set: the nick's sessions)
-- KEYS[5] archivebot:web:rankless (sorted set: sessions signed in without rank)
-- KEYS[6] archivebot:web:session:OLD, the nick's oldest rankless session
--         the caller found (a ranked sign-in may take its place)
-- ARGV[1] now (ms)  ARGV[2] the session's expiry (ms)
-- ARGV[3] sessions per nick (0: no bound)  ARGV[4] sessions in total (0: no bound)
-- ARGV[5] rankless sessions in total (0: no bound)
-- ARGV[6] the session id  ARGV[7] the code's MAC as the caller checked it
-- ARGV[8] the session's rank (0: none)  ARGV[9] the session's presence
-- ARGV[10] the session's MAC  ARGV[11] the id of KEYS[6] ("": none)
-- ARGV[12] the session's creation time (ms), as its MAC has it
-- Returns {"unknown"}, {"used"}, {"expired"}, {"nick_full", N},
-- {"total_full", N}, {"rankless_full", N}, or {"ok", evicted} (evicted:
-- the rankless session of the nick a ranked sign-in replaced, or "").
local now = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('TYPE', KEYS[1]).ok ~= 'hash' then
  return {'unknown'}
end
local f = redis.call('HMGET', KEYS[1], 'nick', 'nick_key', 'account', 'account_known', 'expires_ms', 'used_ms', 'mac')
if f[6] and f[6] ~= '' then return {'used'} end
if not f[5] or tonumber(f[5]) == nil or tonumber(f[5]) <= now then return {'expired'} end
if f[7] ~= ARGV[7] then return {'unknown'} end
for i = 3, 5 do redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now) end
local perNick, total, rankless = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ranked = tonumber(ARGV[8]) > 0
local evicted = ''
if perNick > 0 and redis.call('ZCARD', KEYS[4]) >= perNick then
  -- A ranked sign-in takes the place of the nick's oldest rankless
  -- session (a stranger who held the nick must not lock its owner out).
  local old = ARGV[11]
  if not ranked or old == '' or not redis.call('ZSCORE', KEYS[4], old) or not redis.call('ZSCORE', KEYS[5], old) then
    return {'nick_full', tostring(perNick)}
  end
  redis.call('DEL', KEYS[6])
  for i = 3, 5 do redis.call('ZREM', KEYS[i], old) end
  evicted = old
end
if total > 0 and redis.call('ZCARD', KEYS[3]) >= total then return {'total_full', tostring(total)} end
if not ranked and rankless > 0 and redis.call('ZCARD', KEYS[5]) >= rankless then
  return {'rankless_full', tostring(rankless)}
end
local exp = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'used_ms', now)
redis.call('HSET', KEYS[2], 'nick', f[1], 'nick_key', f[2], 'account', f[3] or '',
  'account_known', f[4] or '0', 'rank', ARGV[8], 'presence', ARGV[9],
  'created_ms', ARGV[12], 'expires_ms', exp, 'mac', ARGV[10])
redis.call('PEXPIREAT', KEYS[2], exp)
redis.call('ZADD', KEYS[3], exp, ARGV[6])
redis.call('ZADD', KEYS[4], exp, ARGV[6])
redis.call('PEXPIREAT', KEYS[4], exp)
if not ranked then
  redis.call('ZADD', KEYS[5], exp, ARGV[6])
end
return {'ok', evicted}
