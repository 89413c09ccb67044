-- feed_view: what one network has to do. Texts at the head of the queue
-- that are already in tweets:done (posted by another program) or final on
-- every configured network leave the queue on the way (feed_finalize).
--
-- KEYS[1] tweets:queue   KEYS[2] tweets:done   KEYS[3] archivebot:tweets:failed
-- KEYS[4] archivebot:feed:urls   KEYS[5] this network's attempts hash
-- KEYS[6] this network's sent zset   KEYS[7..] every configured network's
-- state hash (archivebot:feed:NET:state)
-- ARGV[1] index of this network's state among KEYS[7..] (1-based)
-- ARGV[2] now (UNIX ms)   ARGV[3] budget window (ms)
-- ARGV[4] at most this many pending texts to return
-- Returns {sent in the window, oldest send in the window (ms, 0 if none),
--          pending count, {attempt key, attempt JSON, ...},
--          {text, url, ...} the oldest pending texts (url '' if unknown)}
local mine = KEYS[6 + tonumber(ARGV[1])]
local now = tonumber(ARGV[2])
local max = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', '(' .. tostring(now - tonumber(ARGV[3])))
local used = redis.call('ZCARD', KEYS[6])
local oldest = 0
local o = redis.call('ZRANGE', KEYS[6], 0, 0, 'WITHSCORES')
if #o == 2 then oldest = tonumber(o[2]) end
local attempts = redis.call('HGETALL', KEYS[5])
local items = {}
local start = 0
local nowsec = math.floor(now / 1000)
-- head: still in the run of texts at the head of the queue that may be
-- final everywhere (left behind by a change of configured networks);
-- past it, a text this network has handled costs one HGET.
local head = true
while #items < 2 * max do
  local batch = redis.call('ZRANGE', KEYS[1], start, start + 199)
  if #batch == 0 then break end
  local removed = 0
  for _, text in ipairs(batch) do
    local v = redis.call('HGET', mine, text)
    if v then
      if head and feed_try_finalize(text, 7, nowsec, KEYS[1], KEYS[2], KEYS[3], KEYS[4]) then
        removed = removed + 1
      else
        head = false
      end
    elseif redis.call('ZSCORE', KEYS[2], text) then
      redis.call('ZREM', KEYS[1], text)
      for i = 7, #KEYS do redis.call('HDEL', KEYS[i], text) end
      redis.call('HDEL', KEYS[4], text)
      removed = removed + 1
    else
      head = false
      if #items < 2 * max then
        items[#items + 1] = text
        items[#items + 1] = redis.call('HGET', KEYS[4], text) or ''
      end
    end
  end
  start = start + #batch - removed
end
local pending = redis.call('ZCARD', KEYS[1]) - redis.call('HLEN', mine)
if pending < 0 then pending = 0 end
return {used, tostring(oldest), pending, attempts, items}
