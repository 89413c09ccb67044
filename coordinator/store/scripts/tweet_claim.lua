-- tweet_claim: take the oldest queued text for posting and record the
-- attempt first, so that a crash between posting and recording the post
-- does not post the text again on restart.
--
-- Texts at the head of the queue that are already in tweets:done are
-- removed from the queue (at most 100 per call) and skipped.
--
-- KEYS[1] tweets:queue   KEYS[2] tweets:done   KEYS[3] archivebot:tweets:attempt
-- ARGV[1] now (UNIX seconds, recorded as the attempt time)
-- Returns {}                   the queue holds nothing to post
--         {text, 'claimed'}    attempt recorded: post it now
--         {text, 'attempted', t}  an earlier attempt at time t was never
--                              resolved (the poster crashed or was stopped
--                              mid-post): the text may be online already;
--                              nothing was written
for _ = 1, 100 do
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #head == 0 then
    return {}
  end
  local text = head[1]
  if redis.call('ZSCORE', KEYS[2], text) then
    redis.call('ZREM', KEYS[1], text)
    redis.call('HDEL', KEYS[3], text)
  else
    local t = redis.call('HGET', KEYS[3], text)
    if t then
      return {text, 'attempted', t}
    end
    redis.call('HSET', KEYS[3], text, ARGV[1])
    return {text, 'claimed'}
  end
end
return {}
