# Sourced (not run) by doc/measure-api-attack.sh and
# doc/measure-api-body-attack.sh: the set-up both share. Run from the
# repository's root, under `set -euo pipefail`.
#
# measure_setup BINARY: a work folder $W removed on exit (with every pid
# in $pids killed), ulimit -n 16384, and $bin: BINARY, or, when it is
# empty, ./cmd/archivebot built into $W.
measure_setup() {
  W=$(mktemp -d)
  pids=()
  trap measure_cleanup EXIT
  bin=$1
  if [ -z "$bin" ]; then
    go build -o "$W/archivebot" ./cmd/archivebot
    bin=$W/archivebot
  fi
  ulimit -n 16384
}

measure_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}

# measure_start_node: a redis-server on 127.0.0.1:$rport and the node
# ($node) with its defaults, its web on 127.0.0.1:$hport and its pipeline
# API on 127.0.0.1:$aport (random ports), its stdin held open on fd 3
# (close it with `exec 3>&-`), its stdout in $W/out and stderr in $W/err;
# returns once /healthz answers (or after 10 s).
measure_start_node() {
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
}
