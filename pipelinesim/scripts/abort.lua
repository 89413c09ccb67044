-- abort: the crawl stopped on request (doc/protocol.md, What a pipeline does, step 5).
-- KEYS[1] job hash (ident)   ARGV[1] channel (updates)
redis.call('HSET', KEYS[1], 'aborted', 'true')
redis.call('PUBLISH', ARGV[1], KEYS[1])
return 1
