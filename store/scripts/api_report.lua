-- api_report: write a pipeline API key's pipeline record, upstream's
-- pipeline_report (doc/pipeline-api.md, Pipeline record).
--
-- KEYS[1] the record (pipeline:<md5hex>)   KEYS[2] pipelines
-- ARGV[1] the pipeline_updates channel   ARGV[2] 1 report, 0 unregister
-- ARGV[3 ..] field/value pairs (report)
-- Returns 1; an error when a key has the wrong type (nothing written).
if not typed(KEYS[1], 'hash') or not typed(KEYS[2], 'set') then
  return redis.error_reply('WRONGTYPE the pipeline record or pipelines has the wrong type')
end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], unpack(ARGV, 3))
  redis.call('SADD', KEYS[2], KEYS[1])
else
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], KEYS[1])
end
redis.call('PUBLISH', ARGV[1], KEYS[1])
return 1
