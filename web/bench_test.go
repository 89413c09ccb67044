package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// benchRunning is the number of running jobs the benchmarks serve.
const benchRunning = 100

// seedRunning registers n jobs, has a simulated pipeline take them all and
// log 20 entries each; it returns one ident.
func seedRunning(b *testing.B, be *redistest.Backend, n int) string {
	b.Helper()
	ctx := context.Background()
	st := store.New(be.Client)
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
			srv := New(Options{Store: store.New(be.Client)})
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

// BenchmarkStreamFanout measures the hub alone (no Redis): each op is one
// batch of 100 log entries of 10 jobs, flushed to 50 WebSocket clients on
// loopback, which count entries from the frame header ("n") without
// decoding them. It reports delivered entries per second per client.
// upstream: one frame per entry with the job hash (prepared once for all
// clients).
func BenchmarkStreamFanout(b *testing.B) {
	for _, proto := range []string{"v2", "upstream"} {
		b.Run(proto, func(b *testing.B) {
			const clients, perBatch, jobs = 50, 100, 10
			hub := NewHub(HubOptions{Logger: quietLogger(), QueueV2: 1 << 16, QueueUpstream: 1 << 20,
				ClientBytes: 1 << 30, TotalBytes: 1 << 40, MaxAge: -1})
			api := New(Options{Hub: hub, Store: nil, Logger: quietLogger()})
			handler := api.StreamHandler() // upstream's protocol alone
			if proto == "v2" {
				handler = api.Handler()
			}
			srv := httptest.NewServer(handler)
			defer srv.Close()
			defer hub.shutdown()
			q := ""
			if proto == "v2" {
				q = "?v=2"
			}
			var got atomic.Int64
			var wg sync.WaitGroup
			for range clients {
				d := websocket.Dialer{EnableCompression: true}
				c, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/stream"+q, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						_, msg, err := c.ReadMessage()
						if err != nil {
							return
						}
						if proto == "upstream" {
							got.Add(1)
							continue
						}
						// {"seq":S,"n":N,...: read N from the header.
						if i := bytes.Index(msg, []byte(`,"n":`)); i > 0 {
							rest := msg[i+5:]
							j := bytes.IndexByte(rest, ',')
							if n, err := strconv.Atoi(string(rest[:j])); err == nil {
								got.Add(int64(n))
							}
						}
					}
				}()
			}
			// Dial returns on the 101; the hub counts the client just after.
			for {
				up, v2 := hub.Clients()
				if up+v2 == clients {
					break
				}
				time.Sleep(time.Millisecond)
			}
			job := map[string]string{"url": "http://example.com/", "started_at": "1732900000", "r2xx": "1000",
				"bytes_downloaded": "123456789", "concurrency": "3", "delay_min": "250", "delay_max": "375",
				"items_queued": "5000", "items_downloaded": "2000", "started_by": "alice", "note": "bench"}
			entries := make([]record.LogEntry, perBatch/jobs)
			for i := range entries {
				entries[i] = record.NewLogEntry(fmt.Sprintf(
					`{"type":"download","url":"http://example.com/page/%d","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":1732900000.5}`, i), float64(i))
			}
			want := int64(0)
			b.ResetTimer()
			for range b.N {
				for j := range jobs {
					hub.StreamLog(record.DecodeJob("benchjob"+strconv.Itoa(j), job), entries)
				}
				hub.Flush()
				want += clients * perBatch
				for got.Load() < want {
					// wait until every client has the batch (polling lightly,
					// not to take CPU from the clients)
					time.Sleep(200 * time.Microsecond)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(perBatch*b.N)/b.Elapsed().Seconds(), "entries/s/client")
			hub.shutdown()
			wg.Wait()
		})
	}
}

// benchEntries are n decoded download entries.
func benchEntries(n int) []record.LogEntry {
	out := make([]record.LogEntry, n)
	for i := range out {
		out[i] = record.NewLogEntry(fmt.Sprintf(
			`{"type":"download","url":"http://example.com/page/%d","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":1732900000.5}`, i), float64(i))
	}
	return out
}

var benchJob = map[string]string{"url": "http://example.com/", "started_at": "1732900000", "r2xx": "1000",
	"bytes_downloaded": "123456789", "concurrency": "3", "items_queued": "5000", "started_by": "alice"}

// benchClient is an idleClient with the hub's limits and a queue of
// frames frames.
func benchClient(h *Hub, v2 bool, frames int) *client {
	return idleClient(h, v2, queueLimits{frames: frames, bytes: h.opt.ClientBytes, total: &h.queued,
		maxTot: h.opt.TotalBytes, maxAge: h.opt.MaxAge})
}

// BenchmarkClientPushFull: one log frame pushed to an upstream client
// whose queue (1000 frames) is full, so each push drops the oldest.
func BenchmarkClientPushFull(b *testing.B) {
	h := NewHub(HubOptions{Logger: quietLogger()})
	c := benchClient(h, false, DefaultQueueUpstream)
	pm, _ := websocket.NewPreparedMessage(websocket.TextMessage, []byte(`{"type":"download"}`))
	f := qframe{pm: pm, n: 1, size: 200, at: time.Now()}
	for range DefaultQueueUpstream {
		c.push(f)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.push(f)
	}
}

// BenchmarkHubFlush is the flush path without sockets: 100 entries of 10
// jobs queued, then flushed to 50 clients (of one protocol) that do not
// read, so their queues are full and drop.
func BenchmarkHubFlush(b *testing.B) {
	for _, v2 := range []bool{false, true} {
		name := "upstream"
		if v2 {
			name = "v2"
		}
		b.Run(name, func(b *testing.B) {
			h := NewHub(HubOptions{Logger: quietLogger()})
			for range 50 {
				c := benchClient(h, v2, DefaultQueueUpstream)
				c.setFilter(true, nil, false)
				h.clients[c] = struct{}{}
			}
			entries := benchEntries(10)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for j := range 10 {
					h.StreamLog(record.DecodeJob("benchjob"+strconv.Itoa(j), benchJob), entries)
				}
				h.Flush()
			}
		})
	}
}
