-- notice_ack: forget a notice whose line was delivered (or never can be).
-- One script for every DeliveryQueue (see queue.go).
--
-- KEYS[1] the processing list (e.g. archivebot:finish_notifications:processing)
-- ARGV[1] the notice, byte for byte as notice_take returned it
-- Returns the number of copies removed (0 or 1).
local bad = expect(KEYS[1], 'list')
if bad then
  return bad
end
return redis.call('LREM', KEYS[1], 1, ARGV[1])
