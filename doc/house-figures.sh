#!/bin/bash
# house-figures.sh: the figures of the house issues (doc/architecture.md), for the tree in the current directory.
set -u
ex='_test.go|third_party/|pipelinesim/|soak/'
double='\*= ?2$|\* ?2, [A-Za-z.]*[Mm]ax|min\([a-z]+ ?\* ?2|\b2 ?\* ?(wait|delay|backoff)\b'
echo "backoff implementations (code that doubles a wait): $(grep -rnE "$double" --include=*.go . | grep -Ev "$ex" | wc -l)"
grep -rnE "$double" --include=*.go . | grep -Ev "$ex" | sed 's/^/    /'
echo "backoff types (a struct of Min and Max waits): $(grep -rnE -A3 '^type [A-Za-z]+ struct \{' --include=*.go . | grep -Ev "$ex" | grep -cE '^\S+-\s+Min, Max\s+time.Duration')"
grep -rnE -A3 '^type [A-Za-z]+ struct \{' --include=*.go . | grep -Ev "$ex" | grep -B3 -E '^\S+-\s+Min, Max\s+time.Duration' | grep -E ':[0-9]+:type ' | sed 's/ struct {//; s/^/    /'
echo "Retry-After parsers: $(grep -rn 'Get("Retry-After")' --include=*.go . | grep -Ev "$ex" | wc -l)"
echo "http.Server built: $(grep -rn 'http.Server{' --include=*.go . | grep -Ev "$ex" | wc -l)"
grep -rn 'http.Server{' --include=*.go . | grep -Ev "$ex" | sed 's/^/    /'
echo "polling loops of the notice drain (a ticker waiting for Connected): $(grep -c 'NewTicker' coordinator/deliver.go)"
echo "periodic loops outside run.Every (a ticker whose tick runs a cycle: select on ctx/stop + ticker, fn):"
for f in bot/catalog.go embeddedredis/embedded.go; do grep -n 'time.NewTicker' $f 2>/dev/null | sed "s|^|    $f:|"; done
echo "bare go statements in the files the issue names (pipelineapi/term.go, web/stream*.go):"
grep -n '^\s*go ' pipelineapi/term.go web/stream*.go | grep -v _test | sed 's/^/    /'
echo "non-test Go lines per package, biggest first:"
find . -name '*.go' ! -name '*_test.go' ! -path './third_party/*' -print0 | xargs -0 wc -l | grep -v ' total$' |
  awk '{n=split($2,p,"/"); d=p[2]; for(i=3;i<n;i++) d=d"/"p[i]; s[d]+=$1; t+=$1} END {for (d in s) printf "%6d %5.1f%% %s\n", s[d], 100*s[d]/t, d; printf "%6d total\n", t}' | sort -rn | head -6
echo "methods per consumer interface (the doors):"
for f in bot/store.go web/store.go pipelineapi/store.go tweeter/store.go coordinator/store.go pipelineapi/apitest/apitest.go cmd/archivebot/adminstore.go; do
  [ -f "$f" ] || { echo "    $f (none)"; continue; }
  echo "    $f $(awk '/interface \{/{f=1;next} f&&/^}/{f=0} f&&/^\t[A-Z][A-Za-z]*\(/{n++} END{print n+0}' "$f")"
done
echo "constructors of coordinator taking *store.Store: $(grep -cE '^func New.*\*store\.Store' coordinator/*.go | awk -F: '{s+=$2} END{print s}')"
echo "exported methods of *store.Store: $(grep -hcE '^func \(s \*Store\) [A-Z]' store/*.go | awk '{s+=$1} END{print s}')"
echo "packages outside the standard library the pipeline client links: $(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./pipelineapi/client | grep -c .)"
go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./pipelineapi/client | grep archivebot-go | sed 's|github.com/archiveteam/archivebot-go/|    |'
echo "files naming the job record through store (store.Job, store.Failure, store.LogEntry, store.LogCounts, store.DecodeJob, store.StateOf…): $(grep -rlE '\bstore\.(Job|Failure|LogEntry|LogCounts|DecodeJob|StateOf|JobState|Speaking|NewLogEntry)\b' --include=*.go . | grep -Ev 'third_party/|soak/' | wc -l)"
echo "non-store packages that import store: $(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./... | grep -v '^github.com/archiveteam/archivebot-go/store' | grep -c ' github.com/archiveteam/archivebot-go/store\b')"
echo "non-test imports of coordinator outside cmd/: $(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./... | grep -v /cmd/ | grep -c ' github.com/archiveteam/archivebot-go/coordinator\b')"
echo "files importing coordinator outside cmd/ and coordinator/: $(grep -rl '"github.com/archiveteam/archivebot-go/coordinator"' --include=*.go . | grep -v '^./cmd/\|^./coordinator/' | tr '\n' ' ')"
echo "Go files over 800 lines outside third_party/, tests included:"
find . -name '*.go' -not -path './third_party/*' -print0 | xargs -0 wc -l | grep -v ' total$' | awk '$1 > 800' | sed 's/^/    /'
echo "Store fields set after construction (Now, WaitReplicas, WaitTimeout, CommandFence), tests included: $(grep -rnE '\.(Now|WaitReplicas|WaitTimeout|CommandFence)(, [a-zA-Z.]+)? = ' --include=*.go . | grep -Ev 'third_party/|soak/|cfg\.|opt\.|tc\.|c\.Now = |^./store/store.go' | wc -l)"
echo "lines of Go citing this project's issue numbers outside soak/: $(grep -rnE '[Ii]ssues? ?[0-9]+|TestIssue[0-9]|[Ff]indings? [0-9]+|[Hh]ardening (I|II|III)\b' --include=*.go . | grep -Ev 'third_party/|^./soak/' | wc -l)"
dc=$(command -v deadcode || echo "$(go env GOPATH)/bin/deadcode")
if [ -x "$dc" ]; then
  helpers='third_party/|soak/|irctest/|redistest/|testproc/|testtls/|apitest/|storetest/|faultstore/'
  echo "dead functions (deadcode ./..., unreachable from every main; test helpers, soak/ and third_party/ left out): $("$dc" ./... 2>/dev/null | grep -Ev "$helpers" | wc -l)"
else
  echo "dead functions: install deadcode (go install golang.org/x/tools/cmd/deadcode@v0.45.0) to count them"
fi
