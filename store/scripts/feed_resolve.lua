-- feed_resolve: end an attempt on one network. "posted": its texts are
-- posted ("p:T", or "d:KEY" for a digest, which is also recorded in the
-- network's digests with the texts it carried); "failed": given up ("f:T",
-- the reason recorded in the network's failed set); "release": certainly
-- not posted, the texts are pending again and the attempt no longer counts
-- against the budget. Texts final on every network leave the queue
-- (feed_finalize). All in one atomic step.
--
-- KEYS[1] tweets:queue   KEYS[2] tweets:done   KEYS[3] archivebot:tweets:failed
-- KEYS[4] archivebot:feed:urls   KEYS[5] this network's attempts hash
-- KEYS[6] this network's sent zset   KEYS[7] this network's digests
-- KEYS[8] this network's failed set   KEYS[9..] every configured network's
-- state hash
-- ARGV[1] index of this network's state among KEYS[9..] (1-based)
-- ARGV[2] now (UNIX seconds)   ARGV[3] attempt key
-- ARGV[4] 'posted', 'failed' or 'release'   ARGV[5] reason (failed)
-- Returns the number of texts that left the queue, or -1 when the attempt
-- is not recorded (resolved already).
-- A KEYS of the wrong type: the WRONGTYPE error, before any write.
local e = expects(KEYS[1], 'zset', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'hash',
  KEYS[5], 'hash', KEYS[6], 'zset', KEYS[7], 'zset', KEYS[8], 'zset')
if e then return e end
for i = 9, #KEYS do
  e = expect(KEYS[i], 'hash')
  if e then return e end
end
local mine = KEYS[8 + tonumber(ARGV[1])]
local key = ARGV[3]
local raw = redis.call('HGET', KEYS[5], key)
if not raw then return -1 end
local a = cjson.decode(raw)
local items = a.items
if type(items) ~= 'table' then items = {} end
redis.call('HDEL', KEYS[5], key)
if ARGV[4] == 'release' then
  for _, text in ipairs(items) do
    if redis.call('HGET', mine, text) == 'a:' .. key then
      redis.call('HDEL', mine, text)
    end
  end
  redis.call('ZREM', KEYS[6], key)
  return 0
end
local state
if ARGV[4] == 'failed' then
  state = 'f:' .. ARGV[2]
elseif a.digest then
  state = 'd:' .. key
  redis.call('ZADD', KEYS[7], ARGV[2], cjson.encode({key = key, post = a.post, items = items}))
else
  state = 'p:' .. ARGV[2]
end
local left = 0
for _, text in ipairs(items) do
  if redis.call('HGET', mine, text) == 'a:' .. key then
    redis.call('HSET', mine, text, state)
    if ARGV[4] == 'failed' then
      redis.call('ZADD', KEYS[8], ARGV[2], cjson.encode({text = text, reason = ARGV[5]}))
    end
  end
  if feed_try_finalize(text, 9, ARGV[2], KEYS[1], KEYS[2], KEYS[3], KEYS[4]) then
    left = left + 1
  end
end
return left
