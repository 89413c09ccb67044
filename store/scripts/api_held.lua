-- api_held: the checks every write of a pipeline API key to a job starts
-- with (prepended to api_update, api_abort and api_done). A key acts only
-- on a job it took and still holds: the ident in its held set, the record
-- a hash whose pipeline_id is the key's record and that is not finished.
-- Otherwise nothing is written (except dropping the stale held member)
-- and the script returns {0, why}.
--
-- KEYS[1] the job record   KEYS[2] the key's held set
-- ARGV[1] the key's pipeline record key
local function held_check()
  if redis.call('SISMEMBER', KEYS[2], KEYS[1]) == 0 then
    return 'not taken under this key'
  end
  local t = redis.call('TYPE', KEYS[1])['ok']
  if t ~= 'hash' then
    redis.call('SREM', KEYS[2], KEYS[1])
    return 'the job record is gone'
  end
  local f = redis.call('HMGET', KEYS[1], 'pipeline_id', 'finished_at')
  if f[1] ~= ARGV[1] then
    redis.call('SREM', KEYS[2], KEYS[1])
    return 'the job was rerouted, requeued or taken by another pipeline'
  end
  if f[2] then
    redis.call('SREM', KEYS[2], KEYS[1])
    return 'the job is finished'
  end
  return nil
end
