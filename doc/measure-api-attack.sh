#!/usr/bin/env bash
# The pipeline API under attack: the
# node's open descriptors, goroutines and RSS (its /metrics) while
# 1. SOCKETS sockets send a take's headers announcing a 4 MiB body and then
#    one byte every 5 s, and then SOCKETS idle keep-alive sockets;
# 6. 500 long-poll takes of one key wait (Redis commands per second);
# 4. 20 long-poll takes wait, the key is revoked, then 5 jobs are queued.
# Everything on 127.0.0.1, bounded in time (about 70 s per binary).
# Usage: doc/measure-api-attack.sh [BINARY] [SOCKETS]
#   (default: builds ./cmd/archivebot; 1000 sockets)
# The attack is pipelineapi's TestAttackMeasure; the node runs with a real
# redis-server (started here) and its defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
bin=${1:-}
sockets=${2:-1000}
if [ -z "$bin" ]; then
  go build -o "$W/archivebot" ./cmd/archivebot
  bin=$W/archivebot
fi
ulimit -n 16384
rport=$(( (RANDOM % 20000) + 30000 )) hport=$(( (RANDOM % 20000) + 30000 )) aport=$(( (RANDOM % 20000) + 30000 ))
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$W" > "$W/redis.log" 2>&1 &
pids+=($!)
until redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG; do sleep 0.05; done
printf '[redis]\nurl = "redis://127.0.0.1:%s/0"\n[http]\nlisten = "127.0.0.1:%s"\nstream_listen = ""\n[pipelines]\nlisten = "127.0.0.1:%s"\n' \
  "$rport" "$hport" "$aport" > "$W/c.toml"
mkfifo "$W/in"
REDIS_URL= "$bin" -config "$W/c.toml" < "$W/in" > "$W/out" 2> "$W/err" &
pids+=($!)
exec 3> "$W/in"
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$hport/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
ARCHIVEBOT_API_ATTACK=1 ATTACK_API=127.0.0.1:$aport ATTACK_WEB=127.0.0.1:$hport \
  ATTACK_REDIS=redis://127.0.0.1:$rport/0 ATTACK_SOCKETS=$sockets \
  go test ./pipelineapi/ -run TestAttackMeasure -count=1 -v -timeout 10m 2>&1 | grep -E 'attack_test.go:[0-9]+: ' | sed 's/^ *attack_test.go:[0-9]*: //'
exec 3>&-
