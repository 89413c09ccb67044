package coordinator

// Benchmarks of the reaper and the analyzer, each side by side with a
// straightforward per-job / per-entry implementation of the upstream
// algorithm on the same Redis. Run on miniredis always and on a real
// redis-server when ARCHIVEBOT_TEST_REDIS is set:
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:16379/0 \
//	  go test -run='^$' -bench=. -benchtime=3x ./coordinator/

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// roundTripHook counts round trips: each command and each pipeline (or
// MULTI/EXEC) sent is one.
type roundTripHook struct{ n *atomic.Int64 }

func (h roundTripHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h roundTripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h roundTripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// countingClient is a second client on b's database that counts its round
// trips.
func countingClient(tb testing.TB, b *redistest.Backend) (*redis.Client, *atomic.Int64) {
	tb.Helper()
	n := new(atomic.Int64)
	opt, err := redis.ParseURL(b.URL)
	if err != nil {
		tb.Fatal(err)
	}
	cc := redis.NewClient(opt)
	cc.AddHook(roundTripHook{n})
	tb.Cleanup(func() { cc.Close() })
	return cc, n
}

// seedWorking puts n running jobs in working (replacing what was there):
// one in three made progress since the last check, the others did not.
func seedWorking(tb testing.TB, c *redis.Client, n int) {
	tb.Helper()
	ctx := context.Background()
	c.Del(ctx, store.KeyWorking)
	for lo := 0; lo < n; lo += 1000 {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			ids := make([]any, 0, 1000)
			for i := lo; i < min(n, lo+1000); i++ {
				id := fmt.Sprintf("benchjob%06d", i)
				hb := 100
				if i%3 == 0 {
					hb = 101
				}
				p.HSet(ctx, id, "url", "http://example.com/"+id, "started_by", "alice", "started_in", "#ab",
					"pipeline_id", "pipeline:abc", "heartbeat", hb, "last_acknowledged_heartbeat", 100, "death_timer", 0)
				ids = append(ids, id)
			}
			p.LPush(ctx, store.KeyWorking, ids...)
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// perJobReap is the upstream reaper: LRANGE working, then for each job one
// HMGET and one write. It returns the dead jobs' idents.
func perJobReap(ctx context.Context, c redis.UniversalClient, threshold int64) ([]string, error) {
	idents, err := c.LRange(ctx, store.KeyWorking, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	var dead []string
	for _, id := range idents {
		v, err := c.HMGet(ctx, id, "heartbeat", "last_acknowledged_heartbeat", "finished_at", "failed").Result()
		if err != nil {
			return nil, err
		}
		hbs, ok := v[0].(string)
		if !ok || v[2] != nil || v[3] == "true" {
			continue
		}
		lahs, ok := v[1].(string)
		if !ok {
			if err := c.HSet(ctx, id, "last_acknowledged_heartbeat", hbs).Err(); err != nil {
				return nil, err
			}
			continue
		}
		hb, _ := strconv.ParseInt(hbs, 10, 64)
		lah, _ := strconv.ParseInt(lahs, 10, 64)
		if hb > lah {
			if err := c.HSet(ctx, id, "last_acknowledged_heartbeat", hbs, "death_timer", 0).Err(); err != nil {
				return nil, err
			}
			continue
		}
		timer, err := c.HIncrBy(ctx, id, "death_timer", 1).Result()
		if err != nil {
			return nil, err
		}
		if timer >= threshold {
			dead = append(dead, id)
		}
	}
	return dead, nil
}

func BenchmarkReaperCycle(b *testing.B) {
	ctx := context.Background()
	const threshold = 1 << 30 // nobody dies: every cycle does the same work
	for _, be := range redistest.All(b) {
		for _, n := range []int{100, 1000, 10000} {
			seedWorking(b, be.Client, n)
			b.Run(fmt.Sprintf("%s/jobs=%d/one-script", be.Name, n), func(b *testing.B) {
				c, rt := countingClient(b, be)
				r := NewReaper(store.New(c), newSvcAnnouncer("#ab"), ReaperConfig{Threshold: threshold}, nil)
				if err := r.runOnce(ctx); err != nil { // loads the script
					b.Fatal(err)
				}
				rt.Store(0)
				b.ResetTimer()
				for range b.N {
					if err := r.runOnce(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
			})
			b.Run(fmt.Sprintf("%s/jobs=%d/per-job", be.Name, n), func(b *testing.B) {
				c, rt := countingClient(b, be)
				b.ResetTimer()
				for range b.N {
					if _, err := perJobReap(ctx, c, threshold); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
			})
		}
	}
}

// seedLog writes n log entries for ident (scores 1..n) the way a pipeline
// does, with a job record to count into.
func seedLog(tb testing.TB, c *redis.Client, id string, n int) {
	tb.Helper()
	ctx := context.Background()
	codes := []int{200, 200, 200, 301, 302, 404, 500, 0}
	for lo := 1; lo <= n; lo += 5000 {
		zs := make([]redis.Z, 0, 5000)
		for i := lo; i <= min(n, lo+4999); i++ {
			var e string
			switch {
			case i%97 == 0:
				e = fmt.Sprintf("not json %d", i)
			case i%10 == 0:
				e = fmt.Sprintf(`{"type":"ignore","url":"http://example.com/%d","pattern":"x","source":"global","ts":1}`, i)
			default:
				code := codes[i%len(codes)]
				e = fmt.Sprintf(`{"type":"download","url":"http://example.com/%d","response_code":%d,"wget_code":"OK","is_error":%t,"is_warning":false,"ts":1}`,
					i, code, code == 0 || code >= 500)
			}
			zs = append(zs, redis.Z{Score: float64(i), Member: e})
		}
		if err := c.ZAdd(ctx, store.KeyLog(id), zs...).Err(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := c.HSet(ctx, store.KeyJob(id), "url", "http://example.com/", "log_score", n).Err(); err != nil {
		tb.Fatal(err)
	}
}

// resetAnalysis forgets what was counted, so the next run reads it all.
func resetAnalysis(tb testing.TB, c *redis.Client, id string) {
	tb.Helper()
	err := c.HDel(context.Background(), store.KeyJob(id), "r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk",
		"error_count", "last_analyzed_log_entry").Err()
	if err != nil {
		tb.Fatal(err)
	}
}

// logEntry is the part of a log entry the analyzer reads.
type logEntry struct {
	Type         string `json:"type"`
	ResponseCode any    `json:"response_code"`
	IsError      any    `json:"is_error"`
}

// bucketOf is the counter field of a download entry's response code.
func bucketOf(code any) string {
	var c float64
	switch v := code.(type) {
	case float64:
		c = v
	case string:
		c, _ = strconv.ParseFloat(v, 64)
	}
	if c >= 100 && c < 600 {
		return fmt.Sprintf("r%dxx", int(c)/100)
	}
	return "runk"
}

// perEntryAnalyze is the straightforward per-entry analyzer: read a batch,
// then per entry one HINCRBY for its bucket (and one for error_count) and
// one HSET of the bookmark.
func perEntryAnalyze(ctx context.Context, c redis.UniversalClient, id string, batch int64) (int, error) {
	total := 0
	for {
		last, err := c.HGet(ctx, store.KeyJob(id), "last_analyzed_log_entry").Result()
		if errors.Is(err, redis.Nil) {
			last = "0"
		} else if err != nil {
			return total, err
		}
		zs, err := c.ZRangeByScoreWithScores(ctx, store.KeyLog(id), &redis.ZRangeBy{Min: "(" + last, Max: "+inf", Count: batch}).Result()
		if err != nil {
			return total, err
		}
		for _, z := range zs {
			var e logEntry
			if json.Unmarshal([]byte(z.Member.(string)), &e) == nil && e.Type == "download" {
				if err := c.HIncrBy(ctx, store.KeyJob(id), bucketOf(e.ResponseCode), 1).Err(); err != nil {
					return total, err
				}
				if e.IsError == true || e.IsError == "true" {
					if err := c.HIncrBy(ctx, store.KeyJob(id), "error_count", 1).Err(); err != nil {
						return total, err
					}
				}
			}
			if err := c.HSet(ctx, store.KeyJob(id), "last_analyzed_log_entry", int64(z.Score)).Err(); err != nil {
				return total, err
			}
		}
		total += len(zs)
		if int64(len(zs)) < batch {
			return total, nil
		}
	}
}

// upstreamAnalyze is upstream's analyze-logs: read everything new, count
// in the client, then one pipelined HINCRBY per counter and an HSET of the
// bookmark (not atomic: a crash in between counts entries twice).
func upstreamAnalyze(ctx context.Context, c redis.UniversalClient, id string) (int, error) {
	last, err := c.HGet(ctx, store.KeyJob(id), "last_analyzed_log_entry").Result()
	if errors.Is(err, redis.Nil) {
		last = "0"
	} else if err != nil {
		return 0, err
	}
	zs, err := c.ZRangeByScoreWithScores(ctx, store.KeyLog(id), &redis.ZRangeBy{Min: "(" + last, Max: "+inf"}).Result()
	if err != nil || len(zs) == 0 {
		return 0, err
	}
	counts := map[string]int64{"r1xx": 0, "r2xx": 0, "r3xx": 0, "r4xx": 0, "r5xx": 0, "runk": 0, "error_count": 0}
	for _, z := range zs {
		var e logEntry
		if json.Unmarshal([]byte(z.Member.(string)), &e) == nil && e.Type == "download" {
			counts[bucketOf(e.ResponseCode)]++
			if e.IsError == true {
				counts["error_count"]++
			}
		}
	}
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for f, n := range counts {
			p.HIncrBy(ctx, store.KeyJob(id), f, n)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(zs), c.HSet(ctx, store.KeyJob(id), "last_analyzed_log_entry", int64(zs[len(zs)-1].Score)).Err()
}

func BenchmarkAnalyzer(b *testing.B) {
	ctx := context.Background()
	const entries = 100000
	const id = "benchlogjob"
	for _, be := range redistest.All(b) {
		seedLog(b, be.Client, id, entries)
		run := func(name string, analyze func(c *redis.Client) (int, error)) {
			b.Run(fmt.Sprintf("%s/entries=%d/%s", be.Name, entries, name), func(b *testing.B) {
				c, rt := countingClient(b, be)
				var elapsed time.Duration
				rt.Store(0)
				for range b.N {
					b.StopTimer()
					resetAnalysis(b, be.Client, id)
					b.StartTimer()
					start := time.Now()
					n, err := analyze(c)
					elapsed += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					if n != entries {
						b.Fatalf("analyzed %d entries, want %d", n, entries)
					}
				}
				b.ReportMetric(float64(entries)*float64(b.N)/elapsed.Seconds(), "entries/s")
				b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
			})
		}
		run("batched-cas", func(c *redis.Client) (int, error) {
			a := NewAnalyzer(store.New(c), AnalyzerConfig{TrimAfter: 1 << 30}, slog.New(slog.DiscardHandler))
			res, err := a.Analyze(ctx, id)
			return int(res.Entries), err
		})
		run("per-entry", func(c *redis.Client) (int, error) { return perEntryAnalyze(ctx, c, id, 5000) })
		run("upstream-aggregate", func(c *redis.Client) (int, error) { return upstreamAnalyze(ctx, c, id) })
	}
}

// BenchmarkStatus measures what !status (Summary) and !pending (Queues)
// cost in a big keyspace: 300,000 unrelated keys and 5 named queues.
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:16379/0 \
//	  go test -run='^$' -bench=Status -benchtime=20x ./coordinator/
func BenchmarkStatus(b *testing.B) {
	const keys = 300_000
	for _, be := range redistest.All(b) {
		ctx := context.Background()
		be.Client.FlushDB(ctx)
		for lo := 0; lo < keys; lo += 1000 {
			_, err := be.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
				kv := make([]any, 0, 2000)
				for i := lo; i < min(keys, lo+1000); i++ {
					kv = append(kv, fmt.Sprintf("otherkey%07d", i), "x")
				}
				p.MSet(ctx, kv...)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		seed := store.New(be.Client)
		for i := range 5 {
			id := fmt.Sprintf("benchqueued%d", i)
			if err := seed.Register(ctx, store.NewJob{Ident: id, URL: "http://" + id + ".example/", FetchDepth: "inf",
				Queue: store.KeyPendingNamed(fmt.Sprintf("pipe%d", i))}); err != nil {
				b.Fatal(err)
			}
		}
		c, n := countingClient(b, be)
		s := store.New(c)
		for _, op := range []struct {
			name string
			fn   func() error
		}{
			{"summary", func() error { _, err := s.Summary(ctx); return err }},
			{"queues", func() error { _, err := s.Queues(ctx, 10); return err }},
		} {
			b.Run(fmt.Sprintf("%s/keys=%d/%s", be.Name, keys, op.name), func(b *testing.B) {
				if err := op.fn(); err != nil { // warm: a first read may rebuild an index
					b.Fatal(err)
				}
				n.Store(0)
				start := time.Now()
				for b.Loop() {
					if err := op.fn(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n.Load())/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N)/1000, "ms/op")
			})
		}
	}
}

// BenchmarkScanStarts: one steady-state scan (every job already seen) of
// `working` holding n jobs, one round trip whatever n:
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:16406/0 \
//	  go test -run='^$' -bench='ScanStarts|ChangeSettings' ./coordinator/
func BenchmarkScanStarts(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, be := range redistest.All(b) {
			b.Run(fmt.Sprintf("%s/%d", be.Name, n), func(b *testing.B) {
				ctx := context.Background()
				be.Client.FlushDB(ctx)
				s := store.New(be.Client)
				for i := 0; i < n; i++ {
					id := fmt.Sprintf("job%06d", i)
					be.Client.HSet(ctx, id, "url", "http://x/"+id, "pipeline_id", "pipeline:1", "started_at", "1")
					be.Client.RPush(ctx, store.KeyWorking, id)
				}
				if sc, err := s.ScanStarts(ctx, false); err != nil || sc.Started != int64(n) {
					b.Fatalf("first scan: %d %v", sc.Started, err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := s.ScanStarts(ctx, false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkChangeSettings: one settings change, the history append in the
// settings script included.
func BenchmarkChangeSettings(b *testing.B) {
	for _, be := range redistest.All(b) {
		b.Run(be.Name, func(b *testing.B) {
			ctx := context.Background()
			be.Client.FlushDB(ctx)
			s := store.New(be.Client)
			be.Client.HSet(ctx, "benchjob", "url", "http://x/", "settings_age", "4")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.ChangeSettings(ctx, "benchjob", store.Change{Bump: 1, By: "bench", Set: map[string]string{"concurrency": "3"}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
