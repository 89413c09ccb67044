#!/bin/sh
# Checks deploy/archivebot.service with systemd-analyze verify (CI step).
# verify needs the ExecStart binary to exist: build it into a temporary
# directory and verify a copy of the unit that points there.
set -eu
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null 2>&1; then
	# Under CI (.ci/run installs package systemd for it) a missing
	# systemd-analyze fails: the check must not pass unrun.
	if [ -n "${CI:-}" ]; then
		echo "systemd-analyze not installed, and CI is set: install package systemd" >&2
		exit 1
	fi
	echo "systemd-analyze not installed; skipping" >&2
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/archivebot" ./cmd/archivebot
sed "s|/usr/local/bin/archivebot|$tmp/archivebot|g" deploy/archivebot.service >"$tmp/archivebot.service"
# verify exits 0 on warnings such as an unknown key: any output fails.
out=$(systemd-analyze verify "$tmp/archivebot.service" 2>&1) || { echo "$out" >&2; exit 1; }
if [ -n "$out" ]; then
	echo "$out" >&2
	exit 1
fi
echo "deploy/archivebot.service: systemd-analyze verify OK"
