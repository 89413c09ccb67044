-- take: reserve the next job (doc/protocol.md, What a pipeline does, step 2).
-- KEYS[1] working   KEYS[2 ..] queues, in the order the pipeline checks them
-- ARGV[1] started_at (float seconds)   ARGV[2] pipeline:ID
-- Returns {queue, ident, field, value, ...} (the record after the change),
-- or false when every queue is empty.
for i = 2, #KEYS do
  local ident = redis.call('RPOPLPUSH', KEYS[i], KEYS[1])
  if ident then
    redis.call('HSET', ident, 'started_at', ARGV[1], 'pipeline_id', ARGV[2])
    local out = redis.call('HGETALL', ident)
    table.insert(out, 1, ident)
    table.insert(out, 1, KEYS[i])
    return out
  end
end
return false
