-- report: a pipeline reports itself (doc/protocol.md, What a pipeline does, step 1).
-- KEYS[1] pipeline:ID   KEYS[2] pipelines
-- ARGV[1] channel (archivebot:pipeline_updates)   ARGV[2 ..] field, value, ...
local fields = {}
for i = 2, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('PUBLISH', ARGV[1], KEYS[1])
return 1
