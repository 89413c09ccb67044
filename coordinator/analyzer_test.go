package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// bruteCount counts log entries the obvious way, in Go: the reference the
// analyzer must agree with.
func bruteCount(entries []string) (c record.LogCounts, invalid int64) {
	for _, raw := range entries {
		var v any
		err := json.Unmarshal([]byte(raw), &v)
		e, isObject := v.(map[string]any)
		_, isArray := v.([]any)
		if err != nil || !isObject && !isArray { // not JSON, or a bare scalar
			invalid++
			continue
		}
		if e["type"] != "download" {
			continue
		}
		var code float64 = -1
		switch v := e["response_code"].(type) {
		case float64:
			code = v
		case string:
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				code = f
			}
		}
		switch {
		case code >= 100 && code < 200:
			c.R1xx++
		case code >= 200 && code < 300:
			c.R2xx++
		case code >= 300 && code < 400:
			c.R3xx++
		case code >= 400 && code < 500:
			c.R4xx++
		case code >= 500 && code < 600:
			c.R5xx++
		default:
			c.Runk++
		}
		if e["is_error"] == true || e["is_error"] == "true" {
			c.Errors++
		}
	}
	return c, invalid
}

// oddEntries are log entries beyond what wpull writes, in the shapes
// Redis may hold.
var oddEntries = []string{
	"not json at all",
	`{"type":"download","url":"u","response_code":"503","is_error":"true"}`,
	`{"type":"download","url":"u","response_code":null,"is_error":null}`,
	`{"type":"download","url":"u"}`,
	`{"type":"download","url":"u","response_code":99,"is_error":false}`,
	`{"type":"download","url":"u","response_code":600,"is_error":true}`,
	`{"type":"download","url":"u","response_code":199.9,"is_error":false}`,
	`{"type":"stdout","message":"hello"}`,
	`[1,2,3]`,
	`42`,
	`null`,
	`"a string"`,
	`{"type":"download",`,
}

// oddSeq makes odd entries unique: the log is a sorted set, and the same
// member logged twice would only move.
var oddSeq struct {
	sync.Mutex
	n int
}

// logRandom ships n random entries through the simulated pipeline.
func logRandom(t *testing.T, ctx context.Context, j *pipelinesim.Job, rng *rand.Rand, n int) {
	t.Helper()
	codes := []int{0, 100, 200, 200, 200, 204, 301, 302, 304, 403, 404, 404, 500, 502, 599}
	for i := range n {
		var err error
		switch r := rng.IntN(20); {
		case r == 0:
			oddSeq.Lock()
			oddSeq.n++
			pad := strings.Repeat(" ", oddSeq.n) // still (in)valid JSON as before
			oddSeq.Unlock()
			_, err = j.Log(ctx, oddEntries[rng.IntN(len(oddEntries))]+pad)
		case r < 4:
			_, err = j.LogIgnore(ctx, fmt.Sprintf("http://x/%d", i), "pat", "global")
		default:
			_, err = j.LogDownload(ctx, fmt.Sprintf("http://x/%d", i), codes[rng.IntN(len(codes))])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func jobCounts(t *testing.T, s *store.Store, id string) record.LogCounts {
	t.Helper()
	j, err := s.GetJob(context.Background(), id)
	if err != nil || j == nil {
		t.Fatalf("job %s: %v %v", id, j, err)
	}
	return news.JobProgress(j).Counts
}

// TestAnalyzerMatchesBruteForce: counts written by the analyzer, in small
// batches, with entries arriving in between and four analyzers racing on
// the same job, equal a brute-force count of the whole log.
func TestAnalyzerMatchesBruteForce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := svcQueue(t, s, "http://count.example.com/", "alice", "#ab", store.KeyPending)
		j := mustTake(t, ctx, pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"}))
		for _, e := range oddEntries { // each shape at least once
			if _, err := j.Log(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		a := NewAnalyzer(s, AnalyzerConfig{Batch: 37, TrimAfter: 1 << 30}, svcLog(t))
		var invalid int64
		var mu sync.Mutex
		for round := range 5 {
			logRandom(t, ctx, j, rng, 150)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					res, err := a.Analyze(ctx, id)
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					invalid += res.Invalid
					mu.Unlock()
				})
			}
			wg.Wait()
			if round == 2 { // nothing new: nothing counted
				res, err := a.Analyze(ctx, id)
				if err != nil || res.Entries != 0 {
					t.Errorf("re-analysis read %d entries (err %v), want 0", res.Entries, err)
				}
			}
		}
		all, err := b.Client.ZRange(ctx, store.KeyLog(id), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(oddEntries)+750 {
			t.Fatalf("log holds %d entries", len(all))
		}
		wantCounts, wantInvalid := bruteCount(all)
		if diff := cmp.Diff(wantCounts, jobCounts(t, s, id)); diff != "" {
			t.Errorf("counts (-brute force +analyzer):\n%s", diff)
		}
		if invalid != wantInvalid {
			t.Errorf("invalid entries %d, brute force says %d", invalid, wantInvalid)
		}
		if bm, _ := b.Client.HGet(ctx, id, "last_analyzed_log_entry").Result(); bm != strconv.Itoa(len(all)) {
			t.Errorf("bookmark %q, want %d", bm, len(all))
		}
	})
}

// TestAnalyzerTrim checks the trim rule: consumed entries go once more
// than trim_after of them are present (up to min(analyzed, broadcast)
// with RespectBroadcast); a finished job's consumed entries go at once.
func TestAnalyzerTrim(t *testing.T) {
	tests := []struct {
		name      string
		respect   bool
		seed      map[string]string // extra job fields
		entries   int
		wantLeft  int64
		wantField string // last_trimmed_log_entry
		maxLag    int    // StreamMaxLag
		skipped   int64  // want StreamSkipped
	}{
		{name: "below the threshold", entries: 10, wantLeft: 10},
		{name: "above the threshold", entries: 11, wantLeft: 0, wantField: "11"},
		{name: "respect broadcast: up to the broadcast bookmark", respect: true,
			seed: map[string]string{"last_broadcasted_log_entry": "15"}, entries: 30, wantLeft: 15, wantField: "15"},
		{name: "respect broadcast: nothing broadcast", respect: true, entries: 30, wantLeft: 30},
		{name: "respect broadcast: broadcast ahead of analysis", respect: true,
			seed: map[string]string{"last_broadcasted_log_entry": "99"}, entries: 30, wantLeft: 0, wantField: "30"},
		{name: "stalled stream: trimmed anyway past the lag bound", respect: true, maxLag: 20,
			entries: 100, wantLeft: 20, wantField: "80", skipped: 80},
		{name: "lagging stream within the bound", respect: true, maxLag: 20,
			seed: map[string]string{"last_broadcasted_log_entry": "85"}, entries: 100, wantLeft: 15, wantField: "85"},
		{name: "lag bound, part already broadcast", respect: true, maxLag: 20,
			seed: map[string]string{"last_broadcasted_log_entry": "30"}, entries: 100, wantLeft: 20, wantField: "80", skipped: 50},
		{name: "finished job", seed: map[string]string{"finished_at": "1.5"}, entries: 3, wantLeft: 0, wantField: "3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				id := "trimjob"
				seedLog(t, b.Client, id, tc.entries)
				if len(tc.seed) > 0 {
					b.Client.HSet(ctx, id, tc.seed)
				}
				a := NewAnalyzer(store.New(b.Client), AnalyzerConfig{TrimAfter: 10, RespectBroadcast: tc.respect,
					StreamMaxLag: tc.maxLag}, svcLog(t))
				res, err := a.Analyze(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if res.StreamSkipped != tc.skipped {
					t.Errorf("StreamSkipped %d, want %d", res.StreamSkipped, tc.skipped)
				}
				left, _ := b.Client.ZCard(ctx, store.KeyLog(id)).Result()
				field, _ := b.Client.HGet(ctx, id, "last_trimmed_log_entry").Result()
				got := fmt.Sprint(left, " ", field)
				if want := fmt.Sprint(tc.wantLeft, " ", tc.wantField); got != want {
					t.Errorf("entries left and last_trimmed_log_entry %q, want %q", got, want)
				}
				// What is left is only ever unconsumed or kept for the dashboard.
				if min, _ := b.Client.ZRangeWithScores(ctx, store.KeyLog(id), 0, 0).Result(); len(min) == 1 && tc.wantField != "" {
					if tf, _ := strconv.ParseFloat(tc.wantField, 64); min[0].Score <= tf {
						t.Errorf("entry %v at or below the trim bookmark survived", min[0])
					}
				}
			})
		})
	}
}

// TestAnalyzerMissingJob: a log without its job record (expired) is not
// counted into a new record.
func TestAnalyzerMissingJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		b.Client.ZAdd(ctx, store.KeyLog("gonejob"), redis.Z{Score: 1, Member: `{"type":"download","response_code":200}`})
		res, err := NewAnalyzer(s, AnalyzerConfig{}, svcLog(t)).Analyze(ctx, "gonejob")
		if err != nil || !res.Missing {
			t.Fatalf("Analyze = %+v, %v; want Missing", res, err)
		}
		if n, _ := b.Client.Exists(ctx, "gonejob").Result(); n != 0 {
			t.Error("the analyzer created a job record")
		}
	})
}

// TestAnalyzerUpdatesAndSweep: entries logged while the analyzer listens
// are counted from the `updates` messages; entries whose messages were lost
// (nobody subscribed) are counted by the sweep of working.
func TestAnalyzerUpdatesAndSweep(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := store.New(b.Client)
		id := svcQueue(t, s, "http://listen.example.com/", "alice", "#ab", store.KeyPending)
		j := mustTake(t, ctx, pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"}))
		rng := rand.New(rand.NewPCG(3, 4))
		a := NewAnalyzer(s, AnalyzerConfig{Debounce: -1, TrimAfter: 1 << 30}, svcLog(t))
		analyzed := make(chan AnalyzeResult, 1000)
		a.analyzed = func(ident string, res AnalyzeResult, err error) {
			if ident == id && err == nil {
				analyzed <- res
			}
		}
		u := NewUpdates(store.New(b.Client), svcLog(t))
		u.OnUpdate(a.Notify)
		subscribed := make(chan struct{}, 10)
		u.OnSubscribe(func(context.Context) { subscribed <- struct{}{} })
		listen, stopListening := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { u.Run(listen) })
		wg.Go(func() { a.work(listen) })
		<-subscribed

		logRandom(t, ctx, j, rng, 60)
		var entries int64
		for entries < 60 {
			select {
			case r := <-analyzed:
				entries += r.Entries
			case <-time.After(10 * time.Second):
				t.Fatalf("analyzed %d of 60 entries from updates", entries)
			}
		}
		stopListening()
		wg.Wait()
		for len(analyzed) > 0 {
			if r := <-analyzed; r.Entries != 0 {
				t.Errorf("late analysis of %d entries", r.Entries)
			}
		}
		if entries != 60 {
			t.Fatalf("analyzed %d entries from updates, want 60", entries)
		}

		// Nobody listens: these messages are lost; the sweep finds them.
		logRandom(t, ctx, j, rng, 40)
		if err := a.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-analyzed; r.Entries != 40 {
			t.Errorf("the sweep analyzed %d entries, want 40", r.Entries)
		}
		all, _ := b.Client.ZRange(ctx, store.KeyLog(id), 0, -1).Result()
		want, _ := bruteCount(all)
		if diff := cmp.Diff(want, jobCounts(t, s, id)); diff != "" {
			t.Errorf("counts after the sweep (-brute force +analyzer):\n%s", diff)
		}
	})
}
