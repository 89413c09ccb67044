#!/bin/bash
# house-figures.sh: the figures of the house issue (doc/architecture.md), for the tree in the current directory.
set -u
ex='_test.go|third_party/|pipelinesim/|soak/'
echo "backoff implementations (doubling waits): $(grep -rnE '\*= ?2$|\* ?2, [A-Za-z.]*[Mm]ax|min\([a-z]+ ?\* ?2' --include=*.go . | grep -Ev "$ex" | wc -l)"
grep -rnE '\*= ?2$|\* ?2, [A-Za-z.]*[Mm]ax|min\([a-z]+ ?\* ?2' --include=*.go . | grep -Ev "$ex" | sed 's/^/    /'
echo "Retry-After parsers: $(grep -rn 'Get("Retry-After")' --include=*.go . | grep -Ev "$ex" | wc -l)"
echo "http.Server built: $(grep -rn 'http.Server{' --include=*.go . | grep -Ev "$ex" | wc -l)"
grep -rn 'http.Server{' --include=*.go . | grep -Ev "$ex" | sed 's/^/    /'
echo "periodic loops outside run.Every (a ticker whose tick runs a cycle: select on ctx/stop + ticker, fn):"
for f in bot/catalog.go embeddedredis/embedded.go; do grep -n 'time.NewTicker' $f 2>/dev/null | sed "s|^|    $f:|"; done
echo "bare go statements in the files the issue names (pipelineapi/term.go, web/stream*.go):"
grep -n '^\s*go ' pipelineapi/term.go web/stream*.go | grep -v _test | sed 's/^/    /'
echo "non-test Go lines per package, biggest first:"
find . -name '*.go' ! -name '*_test.go' ! -path './third_party/*' -print0 | xargs -0 wc -l | grep -v ' total$' |
  awk '{n=split($2,p,"/"); d=p[2]; for(i=3;i<n;i++) d=d"/"p[i]; s[d]+=$1; t+=$1} END {for (d in s) printf "%6d %5.1f%% %s\n", s[d], 100*s[d]/t, d; printf "%6d total\n", t}' | sort -rn | head -6
echo "methods per consumer interface (the doors):"
for f in bot/store.go web/store.go pipelineapi/store.go tweeter/store.go cmd/archivebot/adminstore.go; do
  echo "    $f $(awk '/interface \{/{f=1;next} f&&/^}/{f=0} f&&/^\t[A-Z][A-Za-z]*\(/{n++} END{print n}' "$f")"
done
echo "non-test imports of coordinator outside cmd/: $(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./... | grep -v /cmd/ | grep -c ' github.com/archiveteam/archivebot-go/coordinator\b')"
echo "files importing coordinator outside cmd/ and coordinator/: $(grep -rl '"github.com/archiveteam/archivebot-go/coordinator"' --include=*.go . | grep -v '^./cmd/\|^./coordinator/' | tr '\n' ' ')"
echo "non-test files over 800 lines outside third_party/:"
find . -name '*.go' -not -path './third_party/*' -not -name '*_test.go' -print0 | xargs -0 wc -l | grep -v ' total$' | awk '$1 > 800' | sed 's/^/    /'
