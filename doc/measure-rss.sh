#!/usr/bin/env bash
# Measures the control node's resident memory (VmRSS) idle and with 10,000
# running jobs in `working`, on the embedded Redis (the default setup).
# Needs redis-cli. Usage: doc/measure-rss.sh [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-10000}
W=$(mktemp -d)
go build -o "$W/archivebot" ./cmd/archivebot
port=$(( (RANDOM % 20000) + 30000 ))
printf '[redis]\nlisten = "127.0.0.1:%s"\ndata_dir = "%s/data"\n' "$port" "$W" > "$W/c.toml"
mkfifo "$W/in"
"$W/archivebot" -config "$W/c.toml" < "$W/in" > "$W/out" 2> "$W/err" &
pid=$!
exec 3> "$W/in" # the console runs until this is closed
trap 'exec 3>&-; wait $pid || true; rm -rf "$W"' EXIT
until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do sleep 0.05; done
sleep 5
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$pid/status"; }
echo "idle: $(rss)"
# One EVAL creates the jobs (redis-cli's --pipe and stdin modes need
# commands miniredis lacks).
redis-cli -p "$port" eval "for i = 1, tonumber(ARGV[1]) do
  redis.call('HSET', 'job' .. i, 'url', 'http://site' .. i .. '.example/', 'started_by', 'a',
    'started_in', '#a', 'started_at', '1', 'pipeline_id', 'pipeline:x', 'heartbeat', '5',
    'last_acknowledged_heartbeat', '5', 'death_timer', '0')
  redis.call('RPUSH', 'working', 'job' .. i)
end
return redis.call('LLEN', 'working')" 0 "$jobs" > /dev/null
sleep 10
echo "with $jobs working jobs, after 5 reaper cycles: $(rss)"
