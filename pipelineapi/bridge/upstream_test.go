package bridge_test

// The bridge against the node's real pipeline API server and a real Redis,
// driven by Debian's python3-redis with upstream's command sequence
// (testdata/upstream_pipeline.py), compared with the same driver talking
// to Redis directly.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/bridge"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Python is Debian's interpreter, which has python3-redis (.ci/run
// installs it): not the one first on PATH.
const Python = testproc.DebianPython

type sink struct {
	mu      sync.Mutex
	entries map[string]int
}

func (s *sink) StreamLog(job *record.Job, es []record.LogEntry) {
	ident := job.Ident
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[string]int{}
	}
	s.entries[ident] += len(es)
}
func (s *sink) StreamEvent(news.JobEvent) {}
func (s *sink) count(ident string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries[ident]
}

// driver is a running testdata/upstream_pipeline.py: its stdout lines
// report what it did.
type driver struct {
	t testing.TB
	p *testproc.Proc
}

func startDriver(t testing.TB, redisURL, mode, nick string, jobs int) *driver {
	t.Helper()
	return &driver{t: t, p: testproc.Start(t, mode+" driver", Python,
		[]string{"testdata/upstream_pipeline.py", redisURL, mode, nick, fmt.Sprint(jobs)}, testproc.Options{Lines: 1000})}
}

// expect waits for the next line starting with prefix (earlier lines are
// logged) and returns its fields.
func (d *driver) expect(prefix string) []string {
	d.t.Helper()
	return d.p.Expect(d.t, prefix, 60*time.Second)
}

// jobEffects is what a job run leaves in Redis, without what differs by
// run (times, heartbeats, the pipeline's identity) or by design (logs of
// API pipelines are not in Redis).
type jobEffects struct {
	Fields        map[string]string
	RecordTTL     string
	IgnoresTTL    string
	InWorking     bool
	Notice        map[string]any
	CountersDelta map[string]int64
}

func ttlBucket(d time.Duration) string {
	switch {
	case d < 0:
		return fmt.Sprint(d)
	case d <= 5*time.Second:
		return "<=5s"
	case d > 47*time.Hour && d <= 48*time.Hour:
		return "48h"
	}
	return d.String()
}

var runFields = map[string]bool{"started_at": true, "finished_at": true, "heartbeat": true, "pipeline_id": true,
	"queued_at": true, "ts": true, "log_score": true, "last_analyzed_log_entry": true, "last_broadcasted_log_entry": true}

func effects(t testing.TB, ctx context.Context, rdb *redis.Client, ident string, before map[string]int64, notices []string) jobEffects {
	t.Helper()
	rec, _ := rdb.HGetAll(ctx, ident).Result()
	e := jobEffects{Fields: map[string]string{}, CountersDelta: map[string]int64{}}
	for k, v := range rec {
		if !runFields[k] {
			e.Fields[k] = strings.ReplaceAll(v, ident, "IDENT")
		}
	}
	e.RecordTTL = ttlBucket(rdb.TTL(ctx, ident).Val())
	e.IgnoresTTL = ttlBucket(rdb.TTL(ctx, ident+"_ignores").Val())
	e.InWorking = rdb.LPos(ctx, "working", ident, redis.LPosArgs{}).Err() == nil
	for k, v := range counters(ctx, rdb) {
		e.CountersDelta[k] = v - before[k]
	}
	for _, n := range notices {
		var m map[string]any
		json.Unmarshal([]byte(n), &m)
		if m["url"] == rec["url"] {
			delete(m, "pipeline_id")
			delete(m, "queued_at")
			e.Notice = m
		}
	}
	return e
}

func counters(ctx context.Context, rdb *redis.Client) map[string]int64 {
	out := map[string]int64{}
	for _, k := range []string{"jobs_completed", "jobs_aborted"} {
		out[k], _ = rdb.Get(ctx, k).Int64()
	}
	return out
}

// run is one pipeline's two jobs: the first gets a !d and 200 entries
// and is aborted, the second gets a !d, 50 entries and is done.
func run(t *testing.T, ctx context.Context, st *store.Store, rdb *redis.Client, redisURL, mode, tag string) (a, b jobEffects, ia, ib string) {
	t.Helper()
	register := func(name string) string {
		ident := tag + "-" + name
		err := st.Register(ctx, store.NewJob{Ident: ident, URL: "http://example.com/" + name + "/",
			FetchDepth: "inf", Slug: "example.com-inf", StartedBy: "vera", StartedIn: "#ab",
			DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: "pending", Patterns: []string{"ignored\\.example"}})
		if err != nil {
			t.Fatal(err)
		}
		return ident
	}
	change := func(ident string) {
		if _, err := st.ChangeSettings(ctx, ident, store.Change{Set: map[string]string{"delay_min": "1000", "delay_max": "2000"}, Bump: 1, By: "vera"}); err != nil {
			t.Fatal(err)
		}
	}
	ia = register("a")
	before := counters(ctx, rdb)
	d := startDriver(t, redisURL, mode, "e2e-"+tag, 2)
	if f := d.expect("TAKEN"); f[1] != ia {
		t.Fatalf("%s took %q, want %s", mode, f[1], ia)
	}
	d.expect("READY")
	change(ia)
	if f := d.expect("SETTINGS"); f[3] != "1000" || f[4] != "2000" {
		t.Errorf("%s: settings after !d = %v", mode, f)
	}
	d.expect("LOGGED")
	if res, _, err := st.Abort(ctx, ia); err != nil || res != store.AbortRequested {
		t.Fatalf("abort: %v %v", res, err)
	}
	if f := d.expect("SETTINGS"); f[5] != "true" {
		t.Errorf("%s: settings after !abort = %v", mode, f)
	}
	d.expect("ABORTED")
	if f := d.expect("DONE"); f[2] != "True" {
		t.Errorf("%s: first job done with aborted=%s, want True", mode, f[2])
	}
	notices, _ := rdb.LRange(ctx, "finish_notifications", 0, -1).Result()
	a = effects(t, ctx, rdb, ia, before, notices)

	ib = register("b")
	before = counters(ctx, rdb)
	if f := d.expect("TAKEN"); f[1] != ib {
		t.Fatalf("%s took %q, want %s", mode, f[1], ib)
	}
	d.expect("READY")
	change(ib)
	d.expect("SETTINGS")
	d.expect("LOGGED")
	if f := d.expect("DONE"); f[2] != "False" {
		t.Errorf("%s: second job done with aborted=%s, want False", mode, f[2])
	}
	notices, _ = rdb.LRange(ctx, "finish_notifications", 0, -1).Result()
	b = effects(t, ctx, rdb, ib, before, notices)
	d.expect("EXIT")
	return a, b, ia, ib
}

// TestUpstreamPipelineThroughBridge: the same upstream command sequence
// gives the same Redis effects through the bridge and the API as directly
// in Redis; every log entry reaches the live stream; the pipeline record
// comes and goes.
func TestUpstreamPipelineThroughBridge(t *testing.T) {
	testproc.Python(t, "redis")
	b := redistest.RealOrMini(t)
	ctx := context.Background()
	rdb := b.Client
	st := store.New(rdb)
	sk := &sink{}
	hs := apitest.Serve(t, pipelineapi.Options{Store: st, Sink: sk})
	cl := apitest.Client(t, st, hs.URL, "bridge-e2e")
	br := bridge.New(bridge.Config{Node: cl})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go br.Serve(ln)
	t.Cleanup(func() { br.Close() })

	directA, directB, _, _ := run(t, ctx, st, rdb, b.URL, "direct", "d")
	apiA, apiB, ia, ib := run(t, ctx, st, rdb, "redis://"+ln.Addr().String()+"/0", "bridge", "api")
	for _, c := range []struct {
		what         string
		direct, api  jobEffects
		apiIdent     string
		wantEntries  int
		wantPipeline string
	}{{"aborted job", directA, apiA, ia, 200, ""}, {"done job", directB, apiB, ib, 50, ""}} {
		// The URL is the only field that differs by design (the two
		// runs queue different URLs); log_key names the Redis log the
		// API does not fill.
		c.direct.Fields["url"], c.api.Fields["url"] = "", ""
		// The analyzer's counts: the API server counts entries as they
		// arrive; a direct pipeline's are counted by the node's analyzer
		// from the Redis log, which this test does not run (the process
		// test in cmd/archivebot does). Both must be these.
		want := responseCounts(c.wantEntries)
		for k, v := range want {
			if c.api.Fields[k] != v {
				t.Errorf("%s: API %s = %q, want %s", c.what, k, c.api.Fields[k], v)
			}
			delete(c.api.Fields, k)
		}
		if c.direct.Notice != nil && c.api.Notice != nil {
			c.direct.Notice["url"], c.api.Notice["url"] = "", ""
		}
		if !reflect.DeepEqual(c.direct, c.api) {
			t.Errorf("%s: effects differ\ndirect: %+v\napi:    %+v\nfields only direct: %v\nfields only api: %v", c.what, c.direct, c.api,
				diffKeys(c.direct.Fields, c.api.Fields), diffKeys(c.api.Fields, c.direct.Fields))
		}
		if n := sk.count(c.apiIdent); n != c.wantEntries {
			t.Errorf("%s: the live stream got %d entries, want %d", c.what, n, c.wantEntries)
		}
		if n, _ := rdb.Exists(ctx, c.apiIdent+"_log").Result(); n != 0 {
			t.Errorf("%s: the API job has a log in Redis", c.what)
		}
	}
	if st := br.Stats(); st["log_entries"] != 250 {
		t.Errorf("bridge sent %d log entries, want 250 (%v)", st["log_entries"], st)
	}
	for k, v := range br.Stats() {
		if strings.HasPrefix(k, "refused:") || strings.HasPrefix(k, "node_error:") {
			t.Errorf("bridge stats: %s = %d", k, v)
		}
	}
	members, _ := rdb.SMembers(ctx, "pipelines").Result()
	sort.Strings(members)
	if len(members) != 0 {
		t.Errorf("pipelines after both exited: %v", members)
	}
}

// responseCounts are the analyzer's counts of n entries of the driver
// (codes 200, 200, 200, 301, 404, 500 in turn; 5xx are errors).
func responseCounts(n int) map[string]string {
	codes := []int{200, 200, 200, 301, 404, 500}
	c := map[int]int{}
	for i := range n {
		c[codes[i%len(codes)]/100]++
	}
	return map[string]string{"r1xx": "0", "runk": "0", "r2xx": fmt.Sprint(c[2]), "r3xx": fmt.Sprint(c[3]), "r4xx": fmt.Sprint(c[4]),
		"r5xx": fmt.Sprint(c[5]), "error_count": fmt.Sprint(c[5])}
}

func diffKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}
