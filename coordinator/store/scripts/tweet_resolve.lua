-- tweet_resolve: end an attempt: the text leaves the queue for tweets:done
-- (posted) or archivebot:tweets:failed (given up), and its attempt record
-- goes, in one atomic step.
--
-- KEYS[1] tweets:queue   KEYS[2] where it goes (tweets:done or
-- archivebot:tweets:failed)   KEYS[3] archivebot:tweets:attempt
-- ARGV[1] text   ARGV[2] now (UNIX seconds, the score in KEYS[2])
-- Returns 1.
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
