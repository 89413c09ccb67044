package web

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/coordinator/store"
)

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
			hub := NewHub(HubOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), QueueV2: 1 << 16, QueueUpstream: 1 << 20})
			srv := httptest.NewServer(New(Options{Hub: hub, Store: nil, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).StreamHandler())
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
			entries := make([]store.LogEntry, perBatch/jobs)
			for i := range entries {
				entries[i] = store.LogEntry{Score: float64(i), Doc: fmt.Sprintf(
					`{"type":"download","url":"http://example.com/page/%d","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":1732900000.5}`, i)}
			}
			want := int64(0)
			b.ResetTimer()
			for range b.N {
				for j := range jobs {
					hub.StreamLog("benchjob"+strconv.Itoa(j), job, entries)
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
