-- notice_ack: forget a notice whose line was delivered (or never can be).
-- One script for every DeliveryQueue (see queue.go).
--
-- KEYS[1] the processing list (e.g. archivebot:finish_notifications:processing)
-- ARGV[1] the notice, byte for byte as notice_take returned it
-- Returns the number of copies removed (0 or 1).
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'list' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a ' .. t .. ', not a list')
end
return redis.call('LREM', KEYS[1], 1, ARGV[1])
