package main

// The bridge end to end, every part a process: the node (this binary,
// with its pipeline API on), `archivebot bridge` (this binary), ngircd, and
// Debian's python3-redis sending upstream's pipeline command sequence
// (pipelineapi/bridge/testdata/upstream_pipeline.py). The same driver
// then runs against the node's Redis directly: IRC reports, the Redis
// effects and the dashboard stream must be the same.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// proc is this test binary re-executed as `archivebot ARGS...`, or
// another program, its stdout lines on a channel.
type proc struct{ *testproc.Proc }

func startProc(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startExec(t, name, append([]string{envChild + "=1"}, os.Environ()...), exe, args...)
}

func startExec(t testing.TB, name string, env []string, exe string, args ...string) *proc {
	t.Helper()
	return &proc{testproc.Start(t, name, exe, args, testproc.Options{Env: env, Lines: 10000, Tail: 100,
		LogAlways: os.Getenv("E2E_LOG") != ""})}
}

// expect waits for the next stdout line starting with prefix and returns
// its fields.
func (p *proc) expect(t testing.TB, prefix string) []string {
	t.Helper()
	return p.Expect(t, prefix, irctest.WaitFor+30*time.Second)
}

// streamCounter counts the dashboard stream's frames (upstream's format,
// one entry a frame) per job ident.
type streamCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *streamCounter) get(ident string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[ident]
}

func (s *streamCounter) all() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.n {
		out[k] = v
	}
	return out
}

func countStream(t testing.TB, addr string) *streamCounter {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &streamCounter{n: map[string]int{}}
	go func() {
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			var f struct {
				Type    string `json:"type"`
				JobData struct {
					Ident string `json:"ident"`
				} `json:"job_data"`
			}
			if json.Unmarshal(msg, &f) != nil || f.Type != "download" {
				continue
			}
			id := f.JobData.Ident
			s.mu.Lock()
			s.n[id]++
			s.mu.Unlock()
		}
	}()
	return s
}

// bridgeEffects is what a job leaves in Redis, without what differs by run
// (times, heartbeats, the pipeline's identity, the URL) or by design (an
// API pipeline's log is not in Redis).
type bridgeEffects struct {
	Fields      map[string]string
	RecordTTL   string
	IgnoresTTL  string
	InWorking   bool
	Counters    map[string]int64
	HistoryTail []string
}

func snapshot(ctx context.Context, rdb *redis.Client, ident string, before map[string]int64) bridgeEffects {
	rec, _ := rdb.HGetAll(ctx, ident).Result()
	e := bridgeEffects{Fields: map[string]string{}, Counters: map[string]int64{}}
	for k, v := range rec {
		switch k {
		case "started_at", "finished_at", "heartbeat", "pipeline_id", "queued_at", "ts", "url", "log_score",
			"last_analyzed_log_entry", "last_broadcasted_log_entry", "last_trimmed_log_entry",
			"last_acknowledged_heartbeat", "death_timer":
			continue
		}
		e.Fields[k] = strings.ReplaceAll(v, ident, "IDENT")
	}
	ttl := func(key string) string {
		d := rdb.TTL(ctx, key).Val()
		switch {
		case d > 0 && d <= 5*time.Second:
			return "<=5s"
		case d > 47*time.Hour && d <= 48*time.Hour:
			return "48h"
		}
		return d.String()
	}
	e.RecordTTL, e.IgnoresTTL = ttl(ident), ttl(ident+"_ignores")
	e.InWorking = rdb.LPos(ctx, "working", ident, redis.LPosArgs{}).Err() == nil
	for k, v := range jobCounters(ctx, rdb) {
		e.Counters[k] = v - before[k]
	}
	return e
}

func jobCounters(ctx context.Context, rdb *redis.Client) map[string]int64 {
	out := map[string]int64{}
	for _, k := range []string{"jobs_completed", "jobs_aborted"} {
		out[k], _ = rdb.Get(ctx, k).Int64()
	}
	return out
}

// historyEvents are the events of the job's history, sorted, without
// `started`: the node's start scan appends it (every start_interval, or
// on an `updates` message), so whether and where it lands for a job that
// runs a few seconds on a loaded machine is timing, not the pipeline.
func historyEvents(ctx context.Context, rdb *redis.Client, ident string) []string {
	l, _ := rdb.LRange(ctx, "archivebot:history:"+ident, 0, -1).Result()
	var out []string
	for _, e := range l {
		if i := strings.Index(e, `"event":"`); i >= 0 {
			r := e[i+9:]
			if ev := r[:strings.IndexByte(r, '"')]; ev != "started" {
				out = append(out, ev)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestE2EBridgeUpstreamPipeline(t *testing.T) {
	python := testproc.Python(t, "redis")
	b := redistest.RealOrMini(t)
	ctx := context.Background()
	rdb := b.Client
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	const ch = "#bridge"
	op, voice, _ := rolesIn(t, irc, ch)
	httpAddr, apiAddr := freeAddr(t), freeAddr(t)
	cfg := nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL}.write(t)
	text, _ := os.ReadFile(cfg)
	s := strings.Replace(string(text), "listen = \"127.0.0.1:0\"\nstream_listen = \"127.0.0.1:0\"",
		fmt.Sprintf("listen = %q\nstream_listen = \"\"", httpAddr), 1)
	s += fmt.Sprintf("\n[pipelines]\nlisten = %q\n", apiAddr)
	os.WriteFile(cfg, []byte(s), 0o644)
	startChild(t, cfg)
	op.WaitBotIn(botNick, ch)
	stream := countStream(t, httpAddr)

	// The volunteer makes a key; the operator registers it.
	keyFile := filepath.Join(t.TempDir(), "pipeline.key")
	var out, errb bytes.Buffer
	if code := run([]string{"bridge", "-init", "-key", keyFile, "-name", "e2e-bridge"}, nil, &out, &errb); code != 0 {
		t.Fatalf("bridge -init: %s", errb.String())
	}
	pub := strings.TrimSpace(out.String())
	out.Reset()
	if code := run([]string{"pipeline-key", "-config", cfg, "add", "e2e-bridge", pub}, nil, &out, &errb); code != 0 {
		t.Fatalf("pipeline-key add: %s %s", out.String(), errb.String())
	}
	br := startProc(t, "bridge", "bridge", "-key", keyFile, "-node", "http://"+apiAddr, "-listen", "127.0.0.1:0")
	f := br.expect(t, "bridge")
	bridgeURL := ""
	for _, w := range f {
		if strings.HasPrefix(w, "redis://") {
			bridgeURL = w
		}
	}

	type result struct {
		a, b       bridgeEffects
		idA, idB   string
		urlA, urlB string
	}
	scenario := func(mode, redisURL, tag string) result {
		t.Helper()
		var r result
		r.urlA, r.idA = identOf(t, "https://example.com/bridge/"+tag+"/a/")
		r.urlB, r.idB = identOf(t, "https://example.com/bridge/"+tag+"/b/")
		if a := ask(voice, ch, "!a "+r.urlA); !strings.Contains(a, "Queued") {
			t.Fatalf("!a: %q", a)
		}
		before := jobCounters(ctx, rdb)
		d := startExec(t, mode+" pipeline", os.Environ(), python, "../../pipelineapi/bridge/testdata/upstream_pipeline.py",
			redisURL, mode, "e2e-"+tag, "2")
		if f := d.expect(t, "TAKEN"); f[1] != r.idA {
			t.Fatalf("%s took %v, want %s", mode, f, r.idA)
		}
		d.expect(t, "READY")
		if a := ask(voice, ch, "!d "+r.idA+" 1000 2000"); a == "" {
			t.Fatal("!d: no answer")
		}
		if f := d.expect(t, "SETTINGS"); f[3] != "1000" || f[4] != "2000" {
			t.Errorf("%s: settings after !d = %v", mode, f)
		}
		d.expect(t, "LOGGED")
		// The analyzer's counts (in the node for both kinds) before the
		// abort, since an aborted record lives 5 s.
		testproc.Eventually(t, mode+" analyzer counts", func() bool {
			v, _ := rdb.HMGet(ctx, r.idA, "r2xx", "r5xx").Result()
			return v[0] == "101" && v[1] == "33"
		})
		if a := ask(voice, ch, "!abort "+r.idA); !strings.Contains(a, "abort") {
			t.Errorf("!abort: %q", a)
		}
		d.expect(t, "ABORTED")
		if f := d.expect(t, "DONE"); f[2] != "True" {
			t.Errorf("%s: done with aborted=%s", mode, f[2])
		}
		r.a = snapshot(ctx, rdb, r.idA, before)
		op.Expect(mode+" aborted line", fromBot(ch, textIs(finishLine("vera", r.urlA, true))))
		r.a.HistoryTail = historyEvents(ctx, rdb, r.idA)

		if a := ask(voice, ch, "!a "+r.urlB); !strings.Contains(a, "Queued") {
			t.Fatalf("!a: %q", a)
		}
		before = jobCounters(ctx, rdb)
		if f := d.expect(t, "TAKEN"); f[1] != r.idB {
			t.Fatalf("%s took %v, want %s", mode, f, r.idB)
		}
		d.expect(t, "READY")
		ask(voice, ch, "!d "+r.idB+" 1000 2000")
		d.expect(t, "SETTINGS")
		d.expect(t, "LOGGED")
		if f := d.expect(t, "DONE"); f[2] != "False" {
			t.Errorf("%s: done with aborted=%s", mode, f[2])
		}
		op.Expect(mode+" finish line", fromBot(ch, textIs(finishLine("vera", r.urlB, false))))
		testproc.Eventually(t, mode+" analyzer counts of the second job", func() bool {
			v, _ := rdb.HMGet(ctx, r.idB, "r2xx", "r5xx").Result()
			return v[0] == "26" && v[1] == "8"
		})
		r.b = snapshot(ctx, rdb, r.idB, before)
		r.b.HistoryTail = historyEvents(ctx, rdb, r.idB)
		d.expect(t, "EXIT")
		return r
	}
	direct := scenario("direct", b.URL, "direct")
	api := scenario("bridge", bridgeURL, "api")

	for _, c := range []struct {
		what        string
		direct, api bridgeEffects
		ids         [2]string
		entries     int
	}{{"aborted job", direct.a, api.a, [2]string{direct.idA, api.idA}, 200}, {"done job", direct.b, api.b, [2]string{direct.idB, api.idB}, 50}} {
		if !reflect.DeepEqual(c.direct, c.api) {
			t.Errorf("%s: Redis effects differ\ndirect: %+v\nbridge: %+v", c.what, c.direct, c.api)
		}
		for _, id := range c.ids {
			testproc.Eventually(t, fmt.Sprintf("%d entries of %s on the dashboard stream (%v)", c.entries, id, stream.all()), func() bool { return stream.get(id) >= c.entries })
			if n := stream.get(id); n != c.entries {
				t.Errorf("%s: the stream sent %d entries of %s, want %d", c.what, n, id, c.entries)
			}
		}
	}
	lines := botLines(op, ch)
	for _, id := range []string{direct.idA, direct.idB, api.idA, api.idB} {
		if n := countLines(lines, isFinishOf(id)); n != 1 {
			t.Errorf("%d finish lines for %s, want 1", n, id)
		}
	}
	members, _ := rdb.SMembers(ctx, "pipelines").Result()
	sort.Strings(members)
	if len(members) != 0 {
		t.Errorf("pipelines after both exited: %v", members)
	}
}
