#!/usr/bin/env bash
# Peak memory (VmHWM) of the control node while clients attack its embedded
# Redis port, and whether the node survives.
# Usage: doc/measure-redis-attack.sh [BINARY]   (default: builds ./cmd/archivebot)
# Attacks, each against a freshly started node with redis.password set:
#   crash-bulk   *1 $9223372036854775805, no login
#   crash-range  AUTH, then SETRANGE k 9223372036854775000 x
#   big-unauth   4 connections, each *1 $100000000 and 100 MB of data, no login
#   big-range    AUTH, then SETRANGE k 400000000 x (a 400 MB string)
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then
  go build -o "$W/archivebot" ./cmd/archivebot
  bin=$W/archivebot
fi
py=/usr/bin/python3
attack() { # name python-snippet
  local port=$(( (RANDOM % 20000) + 30000 )) hport=$(( (RANDOM % 20000) + 30000 ))
  rm -rf "$W/data"
  printf '[redis]\nlisten = "127.0.0.1:%s"\npassword = "pw"\ndata_dir = "%s/data"\n[http]\nlisten = "127.0.0.1:%s"\nstream_listen = ""\n' \
    "$port" "$W" "$hport" > "$W/c.toml"
  rm -f "$W/in"; mkfifo "$W/in"
  "$bin" -config "$W/c.toml" < "$W/in" > "$W/out" 2> "$W/err" &
  local pid=$!
  exec 3> "$W/in"
  until $py -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; do
    if ! kill -0 $pid 2>/dev/null; then # e.g. the random port was taken
      exec 3>&-; echo "$1: the node did not start: $(tail -1 "$W/err")"; return
    fi
    sleep 0.1
  done
  sleep 2
  local idle; idle=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  PORT=$port timeout 60 $py -c "$2" >/dev/null 2>&1 || true
  sleep 1
  if kill -0 $pid 2>/dev/null; then
    local peak; peak=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
    local ok; ok=$($py -c "
import socket; s = socket.create_connection(('127.0.0.1', $port)); s.sendall(b'*2\r\n\$4\r\nAUTH\r\n\$2\r\npw\r\n*1\r\n\$4\r\nPING\r\n'); import time; time.sleep(0.3); print(s.recv(100))")
    echo "$1: survived; RSS idle $((idle/1024)) MB, peak $((peak/1024)) MB; a new client gets $ok"
    exec 3>&-; wait $pid || true
  else
    exec 3>&-; wait $pid || true
    echo "$1: the node DIED ($(grep -m1 -o 'panic: .*' "$W/err" || tail -1 "$W/err"))"
  fi
}
attack crash-bulk '
import os, socket, time
s = socket.create_connection(("127.0.0.1", int(os.environ["PORT"])))
s.sendall(b"*1\r\n$9223372036854775805\r\n"); time.sleep(1)'
attack crash-range '
import os, socket, time
s = socket.create_connection(("127.0.0.1", int(os.environ["PORT"])))
s.sendall(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*4\r\n$8\r\nSETRANGE\r\n$1\r\nk\r\n$19\r\n9223372036854775000\r\n$1\r\nx\r\n"); time.sleep(1)'
attack big-unauth '
import os, socket, threading
def one():
    try:
        s = socket.create_connection(("127.0.0.1", int(os.environ["PORT"])))
        s.sendall(b"*1\r\n$100000000\r\n")
        chunk = b"x" * (1 << 20)
        for _ in range(96): s.sendall(chunk)
    except OSError: pass
ts = [threading.Thread(target=one) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]'
attack big-range '
import os, socket, time
s = socket.create_connection(("127.0.0.1", int(os.environ["PORT"])))
s.sendall(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*4\r\n$8\r\nSETRANGE\r\n$1\r\nk\r\n$9\r\n400000000\r\n$1\r\nx\r\n"); time.sleep(3)'
