-- api_take: a pipeline API key takes a job (doc/pipeline-api.md, Take a
-- job): the same effect as a direct pipeline's take (doc/protocol.md, What
-- a pipeline does, step 2), plus the ident in the key's held set.
--
-- KEYS[1] working   KEYS[2] archivebot:pipeline_key:NAME:jobs (held set)
-- KEYS[3] archivebot:pipeline_keys
-- KEYS[4 ..] the queues, in the order to try
-- ARGV[1] started_at (w/ frac)   ARGV[2] the key's pipeline record key
-- ARGV[3] the key name   ARGV[4] its public key as the node verified it
-- ARGV[5] the updates channel: the ident is published there on a take, so
-- what reacts to a direct pipeline's first `updates` message (start
-- notices, history, the feed) sees an API take at once
-- Returns {queue, ident, field, value, ...} (the record after the take),
-- {} when every queue is empty, or {'revoked'} (nothing written) when
-- the key is no longer registered with that public key: a take that
-- waited across a revocation or a replacement takes nothing. An ident whose record is gone is taken
-- out of working again and the next one is tried; one that is not a hash
-- is left in working, as a direct pipeline's failed HSET leaves it (the
-- start scan reports it), and the next one is tried.
if not typed(KEYS[1], 'list') or not typed(KEYS[2], 'set') or not typed(KEYS[3], 'hash') then
  return redis.error_reply('WRONGTYPE working, the held set or the keys are not a list/set/hash')
end
if redis.call('HGET', KEYS[3], ARGV[3]) ~= ARGV[4] then
  return {'revoked'}
end
for i = 4, #KEYS do
  if redis.call('TYPE', KEYS[i])['ok'] == 'list' then
    while true do
      local ident = redis.call('RPOPLPUSH', KEYS[i], KEYS[1])
      if not ident then break end
      local t = redis.call('TYPE', ident)['ok']
      if t == 'none' then
        redis.call('LREM', KEYS[1], 1, ident)
      elseif t == 'hash' then
        redis.call('HSET', ident, 'started_at', ARGV[1], 'pipeline_id', ARGV[2])
        redis.call('SADD', KEYS[2], ident)
        redis.call('PUBLISH', ARGV[5], ident)
        local out = redis.call('HGETALL', ident)
        table.insert(out, 1, ident)
        table.insert(out, 1, KEYS[i])
        return out
      end
    end
  end
end
return {}
