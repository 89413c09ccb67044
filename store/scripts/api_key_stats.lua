-- api_key_stats: the batched write of a pipeline API key's statistics
-- (at most one per key per second): last seen, refusals and the last
-- refusal's reason, shown by `archivebot pipeline-key list`.
--
-- KEYS[1] archivebot:pipeline_key:NAME (hash)
-- ARGV[1] last seen (UNIX seconds, '' none)   ARGV[2] refusals to add
-- ARGV[3] the last refusal ('' none)
-- Returns 1; an error when the key has the wrong type.
if not typed(KEYS[1], 'hash') then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is not a hash')
end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'last_seen', ARGV[1]) end
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', KEYS[1], 'refusals', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'last_refusal', ARGV[3]) end
return 1
