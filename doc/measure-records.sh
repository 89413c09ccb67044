#!/usr/bin/env bash
# Two findings about job records, reproduced against a running node and a
# real redis-server (doc/protocol.md, Which record speaks for a job).
# Usage: doc/measure-records.sh [BINARY]   (default: builds ./cmd/archivebot)
#   junk: 12,000 members of `working` that are not jobs are added while the
#       node runs; the log lines of the next 20 s are counted (goal < 2,000).
#   records: (a) `archivebot fail IDENT`, 6 s, `!a` the URL again: /jobs/IDENT's
#       state; (b) a running job, `!fail`, 6 s, the pipeline's late
#       HINCRBYs: the hash, then `!status IDENT` and `!a` of the URL.
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
bin=${1:-}
if [ -z "$bin" ]; then
  go build -o "$W/archivebot" ./cmd/archivebot
  bin=$W/archivebot
fi
port=$(( (RANDOM % 20000) + 30000 )) hport=$(( (RANDOM % 20000) + 30000 ))
redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no --dir "$W" > "$W/redis.log" 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null; wait $rpid 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do redis-cli -p $port ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
R="redis-cli -p $port -n 6"
printf '[redis]\nurl = "redis://127.0.0.1:%s/6"\n[http]\nlisten = "127.0.0.1:%s"\nstream_listen = ""\n' "$port" "$hport" > "$W/c.toml"

start_node() { # out-file
  rm -f "$W/in"; mkfifo "$W/in"
  "$bin" -config "$W/c.toml" -data-dir "$W/data" < "$W/in" > "$1" 2>&1 &
  node=$!
  exec 3> "$W/in"
  sleep 2
}
stop_node() { exec 3>&-; wait $node || true; }
say() { echo "$1" >&3; sleep 0.5; }

echo "== junk members of working"
$R flushdb > /dev/null
start_node "$W/19.log"
for i in $(seq -f '%05g' 0 11999); do printf 'SET junk%s x\r\nRPUSH working junk%s\r\n' "$i" "$i"; done | $R --pipe > /dev/null
before=$(wc -l < "$W/19.log")
sleep 20
after=$(wc -l < "$W/19.log")
stop_node
echo "$((after - before)) log lines in the 20 s after 12,000 junk members of working were added"
head -n "$after" "$W/19.log" | tail -n +"$((before + 1))" | grep -o 'msg=[^=]*' | sed 's/^msg=//; s/ [a-z_]*$//; s/^"[0-9]* \(bad\|more\)/"N \1/' | sort | uniq -c | sort -rn | head -5

echo "== which record speaks after a fail"
$R flushdb > /dev/null
start_node "$W/18.log"
A=$("$bin" ident http://again.example/ | cut -f2)
G=$("$bin" ident http://ghost.example/ | cut -f2)
say "!a http://again.example/"
"$bin" fail -config "$W/c.toml" "$A" > /dev/null
say "!a http://ghost.example/"
$R rpoplpush pending working > /dev/null
$R hset "$G" started_at 1 pipeline_id pipeline:x > /dev/null
say "!fail $G"
sleep 6
say "!a http://again.example/"
echo "(a) /jobs/$A: $(curl -s -H 'Accept: application/json' "http://127.0.0.1:$hport/jobs/$A" | grep -o '"state":"[a-z]*"'); pending: $($R lrange pending 0 -1 | tr '\n' ' ')"
for f in heartbeat bytes_downloaded items_downloaded; do $R hincrby "$G" $f 1 > /dev/null; done
echo "(b) hash after the late HINCRBYs: $($R hgetall "$G" | tr '\n' ' ')"
say "!status $G"
say "!a http://ghost.example/"
sleep 1
stop_node
grep -v '^time=' "$W/18.log" | grep -E "^Job $G|already exists|Queued http://ghost" | tail -3 | sed 's/^/(b) /'
