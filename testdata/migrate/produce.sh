#!/usr/bin/env bash
# Produces upstream.redis.jsonl: the Redis of a running upstream deployment
# at the moment of a switch-over, written by upstream's own code.
#
# Usage: testdata/migrate/produce.sh UPSTREAM_CHECKOUT > testdata/migrate/upstream.redis.jsonl
#
# UPSTREAM_CHECKOUT is a checkout of ArchiveTeam/ArchiveBot (never copied
# into this repository). Needs redis-server, Debian's ruby with ruby-redis,
# ruby-addressable, ruby-uuidtools, ruby-trollop, ruby-yajl, ruby-ffi-rzmq
# and ruby-hiredis, and Debian's python3 with python3-redis.
#
# What runs, all upstream's code on a fresh redis-server (see
# upstream_bot.rb and upstream_pipeline.py for the little glue):
#  1. Two hours before the switch: the bot queues a job, pipeline
#     "pipe-dead" takes it, heartbeats and logs, then crashes (its record
#     stays); upstream's reaper cog then counts 3,600 checks without a
#     heartbeat (two hours at one check every 2 s).
#  2. The bot queues four jobs; pipeline "pipe-one" takes them, logs and
#     heartbeats; one finishes and the bot's finish notifier reports it; an
#     op asks to abort another (the pipeline has not seen it yet); four more
#     jobs are queued (!ao, --pipeline one, --large, a plain !a with an
#     ignore set, a user agent and a note).
#  3. Upstream's plumbing (analyze-logs, log-firehose, trim-logs,
#     set-watermarks) and reaper pass over the jobs.
#  4. The bot and its processes stop. Then a job finishes: its finish
#     notice waits in finish_notifications for a control node.
#  5. The database is dumped, with pipe-one still running its two jobs.
set -euo pipefail
up=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
W=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$W" >"$W/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.02; done
export REDIS_URL="redis://127.0.0.1:$port/0"
py=/usr/bin/python3

bot() { ruby "$here/upstream_bot.rb" "$up" "$root/testdata/reference" >>"$W/bot.out"; }
ident() { (cd "$root" && go run ./cmd/archivebot ident "$1" | cut -f2); }

# A pipeline runs as one process (its id is the md5 of host, fqdn and
# pid): a coprocess fed one step at a time.
start_pipe() { # name nick args...
  local name=$1; shift
  coproc "$name" { "$py" "$here/upstream_pipeline.py" "$up" "$@" 2>>"$W/pipe.err"; }
}
step() { # fd_in fd_out step
  echo "$3" >&"$1"
  local l
  while read -r -u "$2" l; do
    echo "$l" >>"$W/pipe.out"
    case "$l" in "ok "*) return 0 ;; esac
  done
  echo "pipeline ended before: $3" >&2
  cat "$W/pipe.err" >&2
  return 1
}

J1=$(ident https://example.com/running/)
J2=$(ident https://example.org/finished-in-gap/)
J3=$(ident https://example.com/finished-before/)
J4=$(ident https://example.com/abort-me/)
J5=$(ident https://example.org/dead-pipeline/)

# 1. Two hours ago.
bot <<EOF
@clock -7200
vera v #archivebot !a https://example.org/dead-pipeline/
EOF
start_pipe DEAD pipe-dead clock=-7200
step "${DEAD[1]}" "${DEAD[0]}" report
step "${DEAD[1]}" "${DEAD[0]}" take
step "${DEAD[1]}" "${DEAD[0]}" "heartbeat $J5 20"
step "${DEAD[1]}" "${DEAD[0]}" "log $J5 200 200 301"
echo leave >&"${DEAD[1]}"
wait "$DEAD_PID" || true
bot <<EOF
@reaper 3601
EOF

# 2. Now.
bot <<EOF
vera v #archivebot !a https://example.com/running/
vera v #archivebot !a https://example.org/finished-in-gap/
vera v #archivebot !a https://example.com/finished-before/
opal o #archivebot !a https://example.com/abort-me/
vera v #archivebot !ig $J1 \\?sessionid=
vera v #archivebot !d $J1 500 750
EOF
start_pipe ONE pipe-one
p1() { step "${ONE[1]}" "${ONE[0]}" "$1"; }
p1 report
for _ in 1 2 3 4; do p1 take; done
for j in $J1 $J2 $J3 $J4; do p1 "heartbeat $j 5"; done
p1 "log $J1 200 200 200 200 200 200 200 200 200 200 301 404"
p1 "log $J2 200 200 500"
p1 "log $J3 200 0"
p1 "log $J4 200"
p1 "counters $J1 123456 12 40"
p1 "done $J3"
bot <<EOF
@finish-notifier
opal o #archivebot !abort $J4
vera v #archivebot !ao https://example.net/queued-ao/
opal o #archivebot !a https://example.com/queued-named/ --pipeline one
opal o #archivebot !a https://example.com/queued-large/ --large
vera v #archivebot !a https://example.com/queued-plain/ --ignore-sets=blogs --user-agent-alias=firefox --explain="for the switch test"
vera v #archivebot !status
EOF

# 3. Upstream's plumbing and reaper.
all="$J1 $J2 $J3 $J4 $J5"
(cd "$up/plumbing" && printf '%s\n' $all | ruby analyze-logs >/dev/null 2>&1)
(cd "$up/plumbing" && printf '%s\n' $J1 $J2 $J4 | FIREHOSE_SOCKET_URL="ipc://$W/firehose" ruby log-firehose >/dev/null 2>&1)
(cd "$up/plumbing" && printf '%s\n' $all | ruby trim-logs >/dev/null 2>&1)
(cd "$up/plumbing" && printf '%s\n' $all | ruby set-watermarks >/dev/null 2>&1)
bot <<EOF
@reaper 1
EOF

# 4. The bot and its processes stop; the pipeline goes on.
p1 "heartbeat $J1 3"
p1 "done $J2"
p1 "heartbeat $J4 3"
p1 report
echo leave >&"${ONE[1]}"
wait "$ONE_PID" || true

# 5. The dump.
cd "$root"
go run testdata/migrate/dump.go \
  "A running upstream deployment at the moment of a switch-over, written by upstream's own code:" \
  "testdata/migrate/produce.sh drove upstream's bot (Ruby: bot/brain.rb, lib/job.rb, bot/finish_notifier.rb, cogs/reaper.rb)," \
  "its pipeline (Python: pipeline/archivebot/control.py and seesaw/monitoring.py) and its plumbing (analyze-logs," \
  "log-firehose, trim-logs, set-watermarks) from a checkout of ArchiveTeam/ArchiveBot at $(git -C "$up" rev-parse --short HEAD)," \
  "on redis-server $(redis-server --version | awk '{print $3}' | tr -d v=); ignore sets and user agents from testdata/reference." \
  "Jobs: $J1 running on pipe-one; $J2 finished while no control node ran (its notice waits);" \
  "$J3 finished and reported before; $J4 running, abort requested; $J5 left behind by pipe-dead (crashed 2 h ago);" \
  "queued: !ao, --pipeline one, --large, and a plain !a with ignore set blogs, user agent firefox and a note." \
  "Bot replies and pipeline steps: see produce.sh; regenerate with it (times and idents of pipelines change)."
{
  echo "--- bot"; cat "$W/bot.out"; echo "--- pipelines"; cat "$W/pipe.out"
} >&2
