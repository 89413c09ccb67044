-- feed_finalize (a library, included by feed_view.lua and feed_resolve.lua):
-- a text leaves tweets:queue once every configured network has a final
-- state for it (posted "p:", carried by a digest "d:", given up "f:"). It
-- goes to tweets:done when at least one network posted it, else to
-- archivebot:tweets:failed; its fields in every network's state hash and
-- its URL go with it. States start at KEYS[first].
local function feed_final(v)
  if not v then return false end
  local k = string.sub(v, 1, 2)
  return k == 'p:' or k == 'd:' or k == 'f:'
end

-- feed_try_finalize returns true when text left the queue.
local function feed_try_finalize(text, first, now, queue, done, failed, urls)
  local posted = false
  for i = first, #KEYS do
    local v = redis.call('HGET', KEYS[i], text)
    if not feed_final(v) then
      return false
    end
    local k = string.sub(v, 1, 2)
    if k == 'p:' or k == 'd:' then posted = true end
  end
  redis.call('ZREM', queue, text)
  if posted then
    redis.call('ZADD', done, now, text)
  else
    redis.call('ZADD', failed, now, text)
  end
  for i = first, #KEYS do
    redis.call('HDEL', KEYS[i], text)
  end
  redis.call('HDEL', urls, text)
  return true
end
