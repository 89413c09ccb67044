-- notice_return: put the notices a stopped node had taken into delivery
-- and not said back at the head of their pending list, oldest first, for
-- a reader that only pops the pending list (upstream's bot, after a
-- switch back: doc/migrating.md, Rolling back). One step: a reader never
-- sees half of them moved.
--
-- KEYS[1] the processing list (e.g. archivebot:finish_notifications:processing)
-- KEYS[2] its pending list (e.g. finish_notifications)
-- The processing list's left end is the oldest (notice_take RPUSHes);
-- the pending list's left end is its head (upstream's bot LPOPs).
-- RPOPLPUSH moves the newest first, so the oldest ends at the head, in
-- order, before what was already pending (RPOPLPUSH, not LMOVE: Redis
-- 6.0 has no LMOVE).
-- A KEYS of the wrong type: the WRONGTYPE error, before any write.
-- Returns the number of notices moved.
local bad = expect(KEYS[1], 'list') or expect(KEYS[2], 'list')
if bad then
  return bad
end
local n = 0
while redis.call('RPOPLPUSH', KEYS[1], KEYS[2]) do
  n = n + 1
end
return n
