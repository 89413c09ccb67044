package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// benchRunning is the number of running jobs the benchmarks serve.
const benchRunning = 100

// seedRunning registers n jobs, has a simulated pipeline take them all and
// log 20 entries each; it returns one ident.
func seedRunning(b *testing.B, be *redistest.Backend, n int) string {
	b.Helper()
	ctx := context.Background()
	st := store.NewStore(be.Client)
	p := pipelinesim.New(be.Client, pipelinesim.Config{Nickname: "bench"})
	if err := p.Report(ctx, "Running"); err != nil {
		b.Fatal(err)
	}
	var last string
	for i := range n {
		url := fmt.Sprintf("http://bench%d.example.com/", i)
		id := ident.Of(url)
		if err := st.Register(ctx, store.NewJob{Ident: id, URL: url, FetchDepth: "inf", StartedBy: "b",
			StartedIn: "#b", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: store.KeyPending,
			Patterns: []string{"^x", "^y"}}); err != nil {
			b.Fatal(err)
		}
		j, err := p.Take(ctx)
		if err != nil || j == nil {
			b.Fatalf("take: %v %v", j, err)
		}
		for k := range 20 {
			if _, err := j.LogDownload(ctx, fmt.Sprintf("%sp%d", url, k), 200); err != nil {
				b.Fatal(err)
			}
		}
		last = id
	}
	return last
}

// BenchmarkEndpoints measures /status, /logs/recent and /jobs/IDENT with
// 100 running jobs: requests per second through the whole handler, allocs,
// and Redis round trips per request.
//
//	go test -run '^$' -bench BenchmarkEndpoints -benchmem ./web/
func BenchmarkEndpoints(b *testing.B) {
	backends := map[string]func(testing.TB) *redistest.Backend{
		"miniredis": func(t testing.TB) *redistest.Backend { return redistest.Mini(t) },
		"redis":     redistest.RealRedis,
	}
	for _, name := range []string{"miniredis", "redis"} {
		b.Run(name, func(b *testing.B) {
			be := backends[name](b)
			if be == nil {
				b.Skipf("%s not set", redistest.EnvURL)
			}
			id := seedRunning(b, be, benchRunning)
			srv := New(Options{Store: store.NewStore(be.Client)})
			h := srv.Handler()
			rt := redistest.CountRoundTrips(be.Client)
			for _, path := range []string{"/status", "/logs/recent", "/jobs/" + id} {
				b.Run(path, func(b *testing.B) {
					req := httptest.NewRequest(http.MethodGet, path, nil)
					start := rt.Load()
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, req)
						if rec.Code != 200 {
							b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
						}
					}
					b.ReportMetric(float64(rt.Load()-start)/float64(b.N), "roundtrips/op")
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
				})
			}
		})
	}
}
