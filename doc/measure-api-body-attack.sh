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
. doc/measure-lib.sh
conns=${2:-512}
seconds=${3:-20}
measure_setup "${1:-}"
measure_start_node
go test -c -o "$W/pipelineapi.test" ./pipelineapi/
start=$(wc -l < "$W/err")
ARCHIVEBOT_API_BODY_ATTACK=1 ATTACK_API=127.0.0.1:$aport ATTACK_PID=$node ATTACK_CONNS=$conns ATTACK_SECONDS=$seconds \
  ATTACK_REDIS=redis://127.0.0.1:$rport/0 \
  "$W/pipelineapi.test" -test.run TestAttackBodies -test.count=1 -test.v -test.timeout 10m 2>&1 | grep -E 'attackbody_test.go:[0-9]+: ' | sed 's/^ *attackbody_test.go:[0-9]*: //'
echo "--- the node's log during the attack (WARN and above):"
tail -n +"$((start + 1))" "$W/err" | grep -E 'level=(WARN|ERROR)|"level":"(WARN|ERROR)"' | cut -c1-400 | head -40
echo "--- ($(tail -n +"$((start + 1))" "$W/err" | wc -l) lines in all)"
exec 3>&-
