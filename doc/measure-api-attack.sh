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
. doc/measure-lib.sh
measure_setup "${1:-}"
sockets=${2:-1000}
measure_start_node
ARCHIVEBOT_API_ATTACK=1 ATTACK_API=127.0.0.1:$aport ATTACK_WEB=127.0.0.1:$hport \
  ATTACK_REDIS=redis://127.0.0.1:$rport/0 ATTACK_SOCKETS=$sockets \
  go test ./pipelineapi/ -run TestAttackMeasure -count=1 -v -timeout 10m 2>&1 | grep -E 'attack_test.go:[0-9]+: ' | sed 's/^ *attack_test.go:[0-9]*: //'
exec 3>&-
