package main

// The profile by stage: a CPU profile of the node (written by its
// -cpuprofile flag) cut into the stages a log entry passes through, so
// that "where does the leader's CPU go per entry" has one answer that
// can be compared before and after a change (doc/benchmarks.md, The cost
// of a log entry).
//
// The profile is read with github.com/google/pprof/profile, the reader
// go tool pprof itself uses: the format is gzipped protobuf with string
// tables, inlined frames (one location, several lines) and mappings, and
// a second reader of our own would be one more thing to get wrong. It is
// a test-only import; the node does not link it.
//
// Any profile of the node can be cut the same way, e.g. the soak's
// leader's (doc/soak.md: SOAK_BIN a wrapper adding -cpuprofile):
//
//	ARCHIVEBOT_PROFILE=/tmp/node.prof go test ./cmd/archivebot/ -run TestProfileByStage -v

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// A stage rule: a sample belongs to the stage of the first frame, from the
// leaf up, that one of the specific rules' prefixes matches; only when
// none does, to the first generic rule (in their order) matching any
// frame, so a go-redis call made by the firehose is the
// firehose's, and a Redis call made by nothing named is "Redis client
// (other)".
type stageRule struct {
	stage    string
	prefixes []string
}

const mod = "github.com/archiveteam/archivebot-go/"

// Stage names, in the order the table prints them.
const (
	stIntake     = "API intake"
	stSignature  = "signature checks"
	stRelay      = "Redis relay (API log pub/sub, relay stream)"
	stFirehose   = "firehose"
	stEncoding   = "stream encoding (hub, frames)"
	stSockets    = "stream sockets (websocket writes, reads)"
	stCompress   = "compression (permessage-deflate)"
	stIRC        = "IRC"
	stMetrics    = "metrics"
	stServices   = "other services (reaper, notifiers, lease…)"
	stWebOther   = "web API (other)"
	stRedisOther = "Redis client (other)"
	stHTTPOther  = "HTTP server (other)"
	stGC         = "GC (background)"
	stRuntime    = "runtime (scheduler, timers, netpoll)"
	stOther      = "other"
)

var stageOrder = []string{stIntake, stSignature, stRelay, stFirehose, stEncoding, stSockets, stCompress,
	stIRC, stMetrics, stServices, stWebOther, stRedisOther, stHTTPOther, stGC, stRuntime, stOther}

var specificRules = []stageRule{
	{stCompress, []string{"compress/flate.", "github.com/gorilla/websocket.(*flateWriteWrapper)", "github.com/gorilla/websocket.(*flateReadWrapper)",
		"github.com/gorilla/websocket.compressNoContextTakeover", "github.com/gorilla/websocket.decompressNoContextTakeover"}},
	{stSignature, []string{"crypto/ed25519.", "crypto/internal/fips140/ed25519", "crypto/internal/fips140/edwards25519", "crypto/internal/fips140/nistec",
		"crypto/sha256.", "crypto/sha512.", "crypto/internal/fips140/sha256", "crypto/internal/fips140/sha512",
		mod + "pipelineapi/wire.Parsed.Verify", mod + "pipelineapi/wire.BodyDigest", mod + "pipelineapi/wire.ParseHeaders",
		mod + "pipelineapi.(*term).authenticate", mod + "pipelineapi.(*term).precheck", mod + "store.(*Store).CheckNonce"}},
	{stMetrics, []string{"github.com/prometheus/", mod + "internal/metrics."}},
	{stIRC, []string{mod + "bot/irc.", "github.com/ergochat/irc-go/", mod + "bot."}},
	{stFirehose, []string{mod + "coordinator.(*Firehose)", mod + "store.(*Store).RelayBroadcast", mod + "store.(*Store).Broadcast"}},
	{stRelay, []string{mod + "coordinator.(*APILogPublisher)", mod + "coordinator.(*APILogListener)", mod + "coordinator.encodeLogMessages",
		mod + "coordinator.splitLogMessage", mod + "coordinator.(*RelayReader)", mod + "coordinator.relayEventsBody",
		mod + "store.(*Store).PublishAPILog", mod + "store.(*Store).ListenAPILog", mod + "store.(*Store).ReadRelay",
		mod + "coordinator.appendJSON", mod + "coordinator.appendLogEntry", mod + "coordinator.decodeStringMap", mod + "coordinator.decodeFlatASCIIMap"}},
	{stSockets, []string{mod + "web.(*client)", mod + "web.(*batchConn)", mod + "web.(*ring)", mod + "web.(*Hub).serveStream", "github.com/gorilla/websocket."}},
	{stEncoding, []string{mod + "web.(*Hub)", mod + "web.logFrame", mod + "web.eventFrame", mod + "web.(*jobRef)", mod + "web.marshalCompact"}},
	{stIntake, []string{mod + "pipelineapi."}},
	{stServices, []string{mod + "coordinator.", mod + "tweeter.", mod + "news."}},
}

// genericRules are tried in their order over the whole stack. web's
// helpers (web.marshal) serve the stream and the API alike: the stage is
// that of the caller that a specific rule names, else "web API (other)".
var genericRules = []stageRule{
	{stWebOther, []string{mod + "web."}},
	{stServices, []string{mod + "internal/run."}},
	{stRedisOther, []string{"github.com/redis/go-redis/"}},
	{stHTTPOther, []string{"net/http.", "net/textproto.", "bufio.", "crypto/tls."}},
	{stGC, []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcStart", "runtime.markroot", "runtime.gcDrain"}},
	{stRuntime, []string{"runtime.", "internal/runtime/", "syscall.", "internal/poll.", "net."}},
}

func matchRule(rules []stageRule, fn string) (string, bool) {
	for _, r := range rules {
		for _, p := range r.prefixes {
			if strings.HasPrefix(fn, p) {
				return r.stage, true
			}
		}
	}
	return "", false
}

// stageOf is the stage of a stack given leaf first.
func stageOf(stack []string) string {
	for _, fn := range stack {
		if s, ok := matchRule(specificRules, fn); ok {
			return s
		}
	}
	// Generic rules in their order over the whole stack: a syscall of
	// go-redis is Redis's, a GC worker's scan is GC's.
	for _, r := range genericRules {
		for _, fn := range stack {
			if s, ok := matchRule([]stageRule{r}, fn); ok {
				return s
			}
		}
	}
	return stOther
}

// stageProfile is a CPU profile cut by stage.
type stageProfile struct {
	Total    time.Duration            // CPU time sampled
	Wall     time.Duration            // the profile's duration
	ByStage  map[string]time.Duration // CPU time per stage
	TopFuncs map[string][]funcCost    // each stage's heaviest leaf functions
}

type funcCost struct {
	Func string
	CPU  time.Duration
}

// readStageProfile reads a CPU profile and cuts it by stage.
func readStageProfile(path string) (*stageProfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return nil, fmt.Errorf("%s: not a CPU profile (sample types %v)", path, p.SampleType)
	}
	sp := &stageProfile{Wall: time.Duration(p.DurationNanos), ByStage: map[string]time.Duration{}, TopFuncs: map[string][]funcCost{}}
	leaf := map[string]map[string]time.Duration{}
	var stack []string
	for _, s := range p.Sample {
		stack = stack[:0]
		for _, loc := range s.Location {
			// A location's lines are innermost first (inlined calls).
			for _, l := range loc.Line {
				if l.Function != nil {
					stack = append(stack, l.Function.Name)
				}
			}
		}
		d := time.Duration(s.Value[vi])
		st := stageOf(stack)
		sp.Total += d
		sp.ByStage[st] += d
		if len(stack) > 0 {
			if leaf[st] == nil {
				leaf[st] = map[string]time.Duration{}
			}
			leaf[st][stack[0]] += d
		}
	}
	for st, m := range leaf {
		var fs []funcCost
		for fn, d := range m {
			fs = append(fs, funcCost{fn, d})
		}
		slices.SortFunc(fs, func(a, b funcCost) int { return int(b.CPU - a.CPU) })
		sp.TopFuncs[st] = fs[:min(len(fs), 3)]
	}
	return sp, nil
}

// table is the profile by stage as a Markdown table: CPU seconds, share,
// and, given the entries the node carried in the profile's time, µs of
// CPU per entry.
func (sp *stageProfile) table(entries int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| stage | CPU s | share | µs/entry | heaviest leaf functions |\n|---|--:|--:|--:|---|\n")
	for _, st := range stageOrder {
		d := sp.ByStage[st]
		if d == 0 {
			continue
		}
		per := "-"
		if entries > 0 {
			per = fmt.Sprintf("%.1f", float64(d.Microseconds())/float64(entries))
		}
		var top []string
		for _, f := range sp.TopFuncs[st] {
			top = append(top, fmt.Sprintf("%s %.0f%%", shortFunc(f.Func), 100*float64(f.CPU)/float64(d)))
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.1f%% | %s | %s |\n", st, d.Seconds(), 100*float64(d)/float64(sp.Total), per, strings.Join(top, ", "))
	}
	per := "-"
	if entries > 0 {
		per = fmt.Sprintf("%.1f", float64(sp.Total.Microseconds())/float64(entries))
	}
	fmt.Fprintf(&b, "| **all** | %.2f | 100%% | %s | over %.1f s: %.2f cores |\n", sp.Total.Seconds(), per, sp.Wall.Seconds(), sp.Total.Seconds()/max(sp.Wall.Seconds(), 1e-9))
	return b.String()
}

func shortFunc(fn string) string {
	fn = strings.TrimPrefix(fn, mod)
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		fn = fn[i+1:]
	}
	return fn
}

// TestStageOf pins the rules on stacks as the node's profile has them:
// the first specific frame from the leaf decides, generic frames only
// when nothing specific is on the stack.
func TestStageOf(t *testing.T) {
	for _, c := range []struct {
		stack []string
		want  string
	}{
		{[]string{"compress/flate.(*compressor).deflate", "github.com/gorilla/websocket.(*flateWriteWrapper).Write", mod + "web.(*client).writeLoop"}, stCompress},
		{[]string{"crypto/internal/fips140/edwards25519.(*Point).ScalarMult", "crypto/ed25519.Verify", mod + "pipelineapi/wire.Parsed.Verify", mod + "pipelineapi.(*Server).serveHTTP"}, stSignature},
		{[]string{"github.com/redis/go-redis/v9.(*baseClient).process", mod + "store.(*Store).CheckNonce", mod + "pipelineapi.(*term).authenticate"}, stSignature},
		{[]string{"encoding/json.Unmarshal", mod + "record.NewLogEntry", mod + "pipelineapi.(*Server).update"}, stIntake},
		{[]string{"encoding/json.Unmarshal", mod + "record.NewLogEntry", mod + "coordinator.splitLogMessage", mod + "coordinator.(*APILogListener).handle"}, stRelay},
		{[]string{"syscall.Syscall", "github.com/redis/go-redis/v9.(*baseClient).process", mod + "store.(*Store).RelayBroadcast", mod + "coordinator.(*Firehose).relayBatch"}, stFirehose},
		{[]string{"syscall.Syscall", "github.com/redis/go-redis/v9.(*baseClient).process", mod + "coordinator.(*Reaper).runOnce"}, stServices},
		{[]string{mod + "coordinator.appendJSONString", mod + "coordinator.appendLogEntry", mod + "coordinator.encodeLogMessages"}, stRelay},
		{[]string{"syscall.Syscall", "github.com/redis/go-redis/v9.(*baseClient).process"}, stRedisOther},
		{[]string{"strconv.AppendFloat", mod + "web.logFrame", mod + "web.(*Hub).Flush"}, stEncoding},
		{[]string{"encoding/json.appendString", mod + "web.marshal", mod + "web.marshalCompact", mod + "web.(*jobRef).encode", mod + "web.logFrame"}, stEncoding},
		{[]string{"encoding/json.appendString", mod + "web.marshal", mod + "web.writeJSON", mod + "web.(*Server).handleStatus"}, stWebOther},
		{[]string{"syscall.Syscall", "net.(*conn).Write", "github.com/gorilla/websocket.(*Conn).WriteMessage", mod + "web.(*client).writeLoop"}, stSockets},
		{[]string{"internal/poll.(*FD).Write", mod + "web.(*batchConn).flushLocked", mod + "web.(*Hub).Flush"}, stSockets},
		{[]string{"github.com/prometheus/client_golang/prometheus.(*counter).Add", mod + "internal/metrics.APILogEntries", mod + "pipelineapi.(*Server).update"}, stMetrics},
		{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, stGC},
		{[]string{"runtime.findRunnable", "runtime.schedule"}, stRuntime},
		{[]string{"net/http.(*conn).serve"}, stHTTPOther},
		{[]string{mod + "bot/irc.(*Client).write"}, stIRC},
		{nil, stOther},
	} {
		if got := stageOf(c.stack); got != c.want {
			t.Errorf("stageOf(%q) = %q, want %q", c.stack, got, c.want)
		}
	}
}

// compareTables is several profiles by stage side by side: µs of CPU
// per entry (share of the profile) for each, given the entries each
// carried.
func compareTables(names []string, sps []*stageProfile, entries []int) string {
	var b strings.Builder
	b.WriteString("| stage |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n|---|")
	for range names {
		b.WriteString("--:|")
	}
	b.WriteString("\n")
	row := func(label string, d func(sp *stageProfile) time.Duration) {
		fmt.Fprintf(&b, "| %s |", label)
		for i, sp := range sps {
			v := d(sp)
			if entries[i] > 0 {
				fmt.Fprintf(&b, " %.0f µs (%.0f%%) |", float64(v.Microseconds())/float64(entries[i]), 100*float64(v)/float64(sp.Total))
			} else {
				fmt.Fprintf(&b, " %.2f s (%.0f%%) |", v.Seconds(), 100*float64(v)/float64(sp.Total))
			}
		}
		b.WriteString("\n")
	}
	for _, st := range stageOrder {
		if !slices.ContainsFunc(sps, func(sp *stageProfile) bool { return sp.ByStage[st] > 0 }) {
			continue
		}
		row(st, func(sp *stageProfile) time.Duration { return sp.ByStage[st] })
	}
	row("**all**", func(sp *stageProfile) time.Duration { return sp.Total })
	return b.String()
}

// TestProfileByStage prints the profile by stage of any CPU profile of
// the node (ARCHIVEBOT_PROFILE=FILE; ARCHIVEBOT_PROFILE_ENTRIES=N, the
// entries carried in its time, adds µs per entry). Several profiles,
// comma-separated (and as many entry counts), print side by side.
func TestProfileByStage(t *testing.T) {
	paths := os.Getenv("ARCHIVEBOT_PROFILE")
	if paths == "" {
		t.Skip("ARCHIVEBOT_PROFILE names a CPU profile of the node")
	}
	var sps []*stageProfile
	var names []string
	var ns []int
	counts := strings.Split(os.Getenv("ARCHIVEBOT_PROFILE_ENTRIES"), ",")
	for i, path := range strings.Split(paths, ",") {
		sp, err := readStageProfile(path)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if i < len(counts) {
			fmt.Sscan(counts[i], &n)
		}
		sps, names, ns = append(sps, sp), append(names, path), append(ns, n)
	}
	if len(sps) == 1 {
		t.Logf("%s\n%s", paths, sps[0].table(ns[0]))
		return
	}
	t.Logf("\n%s", compareTables(names, sps, ns))
}
