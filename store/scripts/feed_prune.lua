-- feed_prune: forget one network's digests and give-ups recorded before a
-- cutoff, its budget sends older than the window, and URLs of texts no
-- longer queued.
--
-- KEYS[1] this network's digests   KEYS[2] this network's failed set
-- KEYS[3] this network's sent zset   KEYS[4] archivebot:feed:urls
-- KEYS[5] tweets:queue
-- ARGV[1] cutoff (UNIX seconds)   ARGV[2] sends before this go (UNIX ms)
-- Returns {digests removed, failed removed}.
-- A KEYS of the wrong type: the WRONGTYPE error, before any write.
local e = expects(KEYS[1], 'zset', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'hash', KEYS[5], 'zset')
if e then return e end
local d = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
local f = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[2])
local urls = redis.call('HKEYS', KEYS[4])
for _, text in ipairs(urls) do
  if not redis.call('ZSCORE', KEYS[5], text) then
    redis.call('HDEL', KEYS[4], text)
  end
end
return {d, f}
