-- exit: a pipeline shuts down cleanly (doc/protocol.md, What a pipeline does, step 7).
-- KEYS[1] pipeline:ID   KEYS[2] pipelines   ARGV[1] channel (archivebot:pipeline_updates)
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], KEYS[1])
redis.call('PUBLISH', ARGV[1], KEYS[1])
return 1
