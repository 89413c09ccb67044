-- pipeline_remove: forget a pipeline that stopped reporting
-- (`archivebot reap-pipeline`): delete its record and its member of
-- `pipelines`, unless it reported recently.
--
-- KEYS[1] the pipeline record (pipeline:<md5hex>)   KEYS[2] pipelines
-- ARGV[1] now, UNIX seconds
-- ARGV[2] seconds after which its `ts` counts as silent; negative: remove
--         whatever its `ts` (--force)
-- Returns {1} when removed, {0} when there was neither record nor member,
-- {-5, ts} when it reported within ARGV[2] seconds (nothing written),
-- {-3} when a key has the wrong type (nothing written).
local job_ok, t = typed(KEYS[1], 'hash')
if not job_ok or not typed(KEYS[2], 'set') then
  return {-3}
end
if t == 'hash' and tonumber(ARGV[2]) >= 0 then
  local ts = tonumber(redis.call('HGET', KEYS[1], 'ts'))
  if ts and ts >= tonumber(ARGV[1]) - tonumber(ARGV[2]) then
    return {-5, tostring(ts)}
  end
end
local n = redis.call('DEL', KEYS[1]) + redis.call('SREM', KEYS[2], KEYS[1])
if n > 0 then
  return {1}
end
return {0}
