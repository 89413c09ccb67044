package main

// BenchmarkPipelineLoad: 50 pipelines × 4 jobs at 2,000 log entries/s in
// total, through the pipeline API (simulate-pipeline's API mode) and
// directly in Redis (the simulator's Redis mode), against one node run as
// a process. Reported: the node's CPU, Redis commands/s (INFO
// commandstats), the control-message latency (a settings change until the
// pipeline sees it; p50/p99) and the take latency of the API.
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:PORT/0 ARCHIVEBOT_BENCH_SECONDS=20 \
//	  go test ./cmd/archivebot/ -run XXX -bench PipelineLoad -benchtime 1x
//
// A benchmark, not a test: nothing is asserted about the numbers.

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

const (
	benchPipelines = 50
	benchJobsEach  = 4
	benchRate      = 2000 // entries per second in total
)

func BenchmarkPipelineLoad(b *testing.B) {
	secs, _ := strconv.Atoi(os.Getenv("ARCHIVEBOT_BENCH_SECONDS"))
	if secs <= 0 {
		secs = 20
	}
	for _, mode := range []string{"api", "direct"} {
		b.Run(mode, func(b *testing.B) {
			be := redistest.RealRedis(b)
			if be == nil {
				b.Skip("needs a real redis-server (ARCHIVEBOT_TEST_REDIS)")
			}
			for range b.N {
				benchLoad(b, be, mode, time.Duration(secs)*time.Second)
			}
		})
	}
}

func redisCalls(ctx context.Context, rdb *redis.Client) int64 {
	s, _ := rdb.Info(ctx, "commandstats").Result()
	var n int64
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "calls="); i >= 0 {
			v := l[i+6:]
			v = v[:strings.IndexByte(v, ',')]
			c, _ := strconv.ParseInt(v, 10, 64)
			n += c
		}
	}
	return n
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func benchLoad(b *testing.B, be *redistest.Backend, mode string, dur time.Duration) {
	ctx := context.Background()
	rdb := be.Client
	st := store.New(rdb)
	httpAddr, apiAddr := testproc.FreeAddr(b), testproc.FreeAddr(b)
	dir := b.TempDir()
	cfg := filepath.Join(dir, "node.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[redis]\nurl = %q\n[http]\nlisten = %q\nstream_listen = \"\"\n[pipelines]\nlisten = %q\nrate = 1000\n",
		be.URL, httpAddr, apiAddr)), 0o644)
	node := startChildWith(b, []string{"-config", cfg}, testproc.Options{Env: append(os.Environ(), envChild+"=1"), Stdin: true}).Cmd
	defer node.Process.Kill() // and the end of the benchmark waits for it
	time.Sleep(2 * time.Second)

	jobs := benchPipelines * benchJobsEach
	perJob := time.Duration(float64(time.Second) * float64(jobs) / benchRate)
	o := pipelinesim.RunOptions{Entries: 1 << 30, EntryInterval: perJob, HeartbeatInterval: time.Second,
		PollInterval: time.Second, ReportInterval: time.Second}
	var mu sync.Mutex
	var takes, control []time.Duration
	sent := map[string]time.Time{} // ident → when its settings changed
	running := map[string]bool{}
	o.OnEvent = func(e pipelinesim.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case pipelinesim.EventTake:
			running[e.Ident] = true
			if mode == "api" {
				takes = append(takes, time.Duration(e.N)*time.Microsecond)
			}
		case pipelinesim.EventSetting:
			if t0, ok := sent[e.Ident]; ok {
				control = append(control, time.Since(t0))
				delete(sent, e.Ident)
			}
		}
	}
	for i := range jobs {
		if err := st.Register(ctx, store.NewJob{Ident: fmt.Sprintf("bench%s%04d", mode, i), URL: fmt.Sprintf("http://bench%d.example/", i),
			FetchDepth: "inf", Slug: "x", StartedBy: "bench", StartedIn: "#ab", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: "pending"}); err != nil {
			b.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for p := range benchPipelines {
		name := fmt.Sprintf("bench-%s-%02d", mode, p)
		if mode == "api" {
			pub, priv, _ := ed25519.GenerateKey(nil)
			if err := st.AddPipelineKey(ctx, name, wire.FormatPublicKey(pub)); err != nil {
				b.Fatal(err)
			}
			c, _ := client.New("http://"+apiAddr, name, priv)
			sim := pipelinesim.NewAPI(c, pipelinesim.Config{Nickname: name})
			wg.Add(1)
			go func() { defer wg.Done(); sim.Run(runCtx, o, benchJobsEach) }()
			continue
		}
		for w := range benchJobsEach {
			sim := pipelinesim.New(redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, DB: rdb.Options().DB, PoolSize: 3}),
				pipelinesim.Config{Nickname: name, ID: fmt.Sprintf("%x", rand.Uint64()) + strconv.Itoa(w)})
			wg.Add(1)
			go func() { defer wg.Done(); sim.Run(runCtx, o) }()
		}
	}
	// Warm up until every job runs, then measure.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(running)
		mu.Unlock()
		if n >= jobs || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cpu0, calls0, t0 := procCPU(node.Process.Pid), redisCalls(ctx, rdb), time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	for time.Since(t0) < dur {
		<-tick.C
		id := fmt.Sprintf("bench%s%04d", mode, rand.IntN(jobs))
		mu.Lock()
		if _, busy := sent[id]; busy || !running[id] {
			mu.Unlock()
			continue
		}
		sent[id] = time.Now()
		mu.Unlock()
		st.ChangeSettings(ctx, id, store.Change{Set: map[string]string{"delay_min": strconv.Itoa(rand.IntN(1000))}, Bump: 1, By: "bench"})
	}
	tick.Stop()
	elapsed := time.Since(t0)
	cpu, calls := procCPU(node.Process.Pid)-cpu0, redisCalls(ctx, rdb)-calls0
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	b.ReportMetric(float64(cpu)/float64(elapsed)*100, "node-cpu-%")
	b.ReportMetric(float64(calls)/elapsed.Seconds(), "redis-cmds/s")
	b.ReportMetric(float64(pct(control, 0.5).Milliseconds()), "control-p50-ms")
	b.ReportMetric(float64(pct(control, 0.99).Milliseconds()), "control-p99-ms")
	if mode == "api" {
		b.ReportMetric(float64(pct(takes, 0.5).Milliseconds()), "take-p50-ms")
		b.ReportMetric(float64(pct(takes, 0.99).Milliseconds()), "take-p99-ms")
	}
	b.Logf("%s: %d jobs running, %d control messages measured, %d takes, over %s", mode, len(running), len(control), len(takes), elapsed.Round(time.Millisecond))
}
