-- feed_summary: record the UTC day whose summary a network posted.
-- KEYS[1] archivebot:feed:NET:summary   ARGV[1] day (YYYY-MM-DD)
redis.call('SET', KEYS[1], ARGV[1])
return 1
