#!/usr/bin/env bash
# The pipeline API under a body flood: CONNS connections (default 512)
# from 9 loopback addresses (127.0.0.1–9) send an update's headers naming
# a registered key and a 4 MiB body with a forged signature, again and
# again for SECONDS (default 20), while a pipeline takes a job every half
# second over a fresh connection. Prints the node's RSS (idle, peak above
# idle, after), the answers the attackers got, the takes' times, and the
# node's log during the attack (what an operator sees).
# Usage: doc/measure-api-body-attack.sh [BINARY] [CONNS] [SECONDS]
#   (default: builds ./cmd/archivebot)
# The attack is pipelineapi's TestAttackBodies; the node runs with a real
# redis-server (started here) and its defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
bin=${1:-}
conns=${2:-512}
seconds=${3:-20}
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
node=$!
pids+=($node)
exec 3> "$W/in"
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$hport/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
go test -c -o "$W/pipelineapi.test" ./pipelineapi/
start=$(wc -l < "$W/err")
ARCHIVEBOT_API_BODY_ATTACK=1 ATTACK_API=127.0.0.1:$aport ATTACK_PID=$node ATTACK_CONNS=$conns ATTACK_SECONDS=$seconds \
  ATTACK_REDIS=redis://127.0.0.1:$rport/0 \
  "$W/pipelineapi.test" -test.run TestAttackBodies -test.count=1 -test.v -test.timeout 10m 2>&1 | grep -E 'attackbody_test.go:[0-9]+: ' | sed 's/^ *attackbody_test.go:[0-9]*: //'
echo "--- the node's log during the attack (WARN and above):"
tail -n +"$((start + 1))" "$W/err" | grep -E 'level=(WARN|ERROR)|"level":"(WARN|ERROR)"' | cut -c1-400 | head -40
echo "--- ($(tail -n +"$((start + 1))" "$W/err" | wc -l) lines in all)"
exec 3>&-
