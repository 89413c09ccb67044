-- notice_take: move the oldest notice of a delivery queue into its
-- processing list, so it is not lost if the bot dies before its line is
-- sent (LMOVE, as a script so that every write of a service is one
-- script). One script for every DeliveryQueue (finish, start and admin
-- notices; see queue.go).
--
-- KEYS[1] the pending list (e.g. finish_notifications)
-- KEYS[2] its processing list (e.g. archivebot:finish_notifications:processing)
-- Returns the notice moved, or false (nil) when there is none.
local bad = expect(KEYS[1], 'list') or expect(KEYS[2], 'list')
if bad then
  return bad
end
local doc = redis.call('LPOP', KEYS[1])
if not doc then
  return false
end
redis.call('RPUSH', KEYS[2], doc)
return doc
