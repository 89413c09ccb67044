#!/usr/bin/env bash
# Measures `archivebot migrate check` on a large keyspace: JOBS finished
# job records (hash and ignore set each, 48 h TTL) and 10,000 queued ones
# in `pending`, on a scratch redis-server of its own. Prints the check's
# first line (keys, time) and /usr/bin/time's wall time and peak memory,
# three times. Needs redis-server and redis-cli. Run it under
# `flock /work/locks/heavy` on the shared machine.
# Usage: doc/measure-migrate-check.sh [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-30000}
W=$(mktemp -d)
port=$(( (RANDOM % 20000) + 30000 ))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$W" > "$W/redis.log" 2>&1 &
rpid=$!
trap 'kill $rpid; wait $rpid 2>/dev/null || true; rm -rf "$W"' EXIT
go build -o "$W/archivebot" ./cmd/archivebot
until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do sleep 0.05; done
redis-cli -p "$port" eval "
for i = 1, tonumber(ARGV[1]) do
  local id = 'j' .. i
  redis.call('HSET', id, 'url', 'https://example.com/' .. i .. '/', 'fetch_depth', 'inf', 'log_key', id .. '_log',
    'ignore_patterns_set_key', id .. '_ignores', 'started_by', 'vera', 'started_in', '#archivebot',
    'queued_at', '1700000000', 'settings_age', '4', 'delay_min', '250', 'delay_max', '375', 'concurrency', '3',
    'finished_at', '1700000100', 'pipeline_id', 'pipeline:abc', 'started_at', '1700000001')
  redis.call('SADD', id .. '_ignores', 'a', 'b')
  redis.call('EXPIRE', id, 172800)
end
for i = 1, 10000 do
  local id = 'q' .. i
  redis.call('HSET', id, 'url', 'https://example.org/' .. i .. '/', 'queued_at', '1700000000', 'started_in', '#archivebot')
  redis.call('LPUSH', 'pending', id)
end
return redis.call('DBSIZE')" 0 "$jobs"
for _ in 1 2 3; do
  REDIS_URL="redis://127.0.0.1:$port/0" /usr/bin/time -f "%e s elapsed, %M KB peak RSS" "$W/archivebot" migrate check 2>&1 |
    grep -E "keys read|elapsed"
done
