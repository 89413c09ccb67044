-- web_login: turn a one-time sign-in code into a dashboard session, in one
-- step (doc/web.md, Signing in and acting). The code is consumed only when
-- a session is made; a full bound leaves it unused.
--
-- KEYS[1] archivebot:web:code:HASH (hash: nick, nick_key, account,
--         account_known, expires_ms, used_ms)
-- KEYS[2] archivebot:web:session:ID (the new session)
-- KEYS[3] archivebot:web:sessions (sorted set: session id -> expiry ms)
-- KEYS[4] archivebot:web:nick:NICK_KEY (sorted set: the nick's sessions)
-- ARGV[1] now (ms)  ARGV[2] session lifetime (ms)
-- ARGV[3] sessions per nick (0: no bound)  ARGV[4] sessions in total (0: no bound)
-- ARGV[5] the session's CSRF token  ARGV[6] the session id
-- ARGV[7] the nick key the caller read from the code
-- Returns {"unknown"}, {"used"}, {"expired"}, {"nick_full", N},
-- {"total_full", N}, or {"ok", nick, account, account_known, expires_ms}.
local now = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('TYPE', KEYS[1]).ok ~= 'hash' then
  return {'unknown'}
end
local f = redis.call('HMGET', KEYS[1], 'nick', 'nick_key', 'account', 'account_known', 'expires_ms', 'used_ms')
if f[6] and f[6] ~= '' then return {'used'} end
if not f[5] or tonumber(f[5]) == nil or tonumber(f[5]) <= now then return {'expired'} end
if f[2] ~= ARGV[7] then return {'unknown'} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local perNick, total = tonumber(ARGV[3]), tonumber(ARGV[4])
if perNick > 0 and redis.call('ZCARD', KEYS[4]) >= perNick then return {'nick_full', tostring(perNick)} end
if total > 0 and redis.call('ZCARD', KEYS[3]) >= total then return {'total_full', tostring(total)} end
local exp = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'used_ms', now)
redis.call('HSET', KEYS[2], 'nick', f[1], 'nick_key', f[2], 'account', f[3] or '',
  'account_known', f[4] or '0', 'created_ms', now, 'expires_ms', exp, 'csrf', ARGV[5])
redis.call('PEXPIREAT', KEYS[2], exp)
redis.call('ZADD', KEYS[3], exp, ARGV[6])
redis.call('ZADD', KEYS[4], exp, ARGV[6])
redis.call('PEXPIREAT', KEYS[4], exp)
return {'ok', f[1], f[3] or '', f[4] or '0', tostring(exp)}
