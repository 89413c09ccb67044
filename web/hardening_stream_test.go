package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"time"

	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/coordinator/redistest"
)

// An oversized log entry (hardening II, finding 4) is never loaded whole:
// /logs/recent leaves it out (and still answers the entries around it),
// the live stream leaves it out, and the analyzer counts it invalid and
// moves past it.
func TestOversizedLogEntry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, false)
		ctx := context.Background()
		j := r.queueAndTake(t, "bigjob", "http://big.example/")
		c := r.dial(t, r.main.URL, "", "")
		huge := `{"type":"stdout","message":"` + strings.Repeat("x", 2<<20) + `"}`
		j.LogDownload(ctx, "http://big.example/before", 200)
		j.Log(ctx, huge)
		j.LogDownload(ctx, "http://big.example/after", 200)
		r.tap.waitFor(t, "the entries", func() bool { return r.tap.logs[j.Ident] >= 3 })

		// The stream: the two downloads, never the huge entry.
		for _, want := range []string{"/before", "/after"} {
			m := readJSON(t, c)
			if u, _ := m["url"].(string); !strings.HasSuffix(u, want) {
				t.Fatalf("stream frame %v, want the download of %s", m["type"], want)
			}
		}

		resp, err := http.Get(r.main.URL + "/logs/recent")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) > 64<<10 {
			t.Fatalf("/logs/recent sent %d bytes: the oversized entry was loaded", len(body))
		}
		var got []map[string]any
		if err := json.Unmarshal(body, &got); err != nil || len(got) != 2 {
			t.Fatalf("/logs/recent: %v, %d entries, want the 2 downloads", err, len(got))
		}

		an := coordinator.NewAnalyzer(r.store, coordinator.AnalyzerConfig{}, nil)
		res, err := an.Analyze(ctx, j.Ident)
		if err != nil || res.Entries != 3 || res.Invalid != 1 || res.Counts.R2xx != 2 {
			t.Fatalf("analyze: %+v, %v; want 3 entries, 1 invalid, 2 2xx", res, err)
		}
	})
}

// A client message that deflate shrank below the 64 KiB read limit but
// that inflates far past it (hardening II, finding 2: a 48 KB frame
// carrying 50 MB) closes the connection with 1009 before it is inflated:
// the node never holds it.
func TestStreamDecompressionBomb(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, true)
		for _, srv := range []string{r.main.URL + "?v=2", r.second.URL} {
			base, q, _ := strings.Cut(srv, "?")
			if q != "" {
				q = "?" + q
			}
			c := r.dial(t, base, q, "")
			c.EnableWriteCompression(true)
			c.SetCompressionLevel(9)
			bomb := []byte(`{"subscribe":["` + strings.Repeat("a", 32<<20) + `"]}`)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			// The node may close before the client has written it all.
			werr := c.WriteMessage(websocket.TextMessage, bomb)
			bomb = nil
			var err error
			for err == nil {
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				_, _, err = c.ReadMessage()
			}
			runtime.ReadMemStats(&after)
			if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) && werr == nil {
				t.Errorf("%s: the bomb ended with %v, want close 1009", srv, err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
				t.Errorf("%s: %d MB allocated while reading a 32 MB message", srv, grew>>20)
			}
		}
	})
}

// Slow clients of our protocol with different subscriptions (hardening II,
// finding 3) each hold at most ClientBytes (4 MiB) of frames, not 256
// frames of any size: past that the oldest are dropped and the client is
// told how many entries it lost.
func TestStreamSlowClientsBoundedInBytes(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, true)
		ctx := context.Background()
		const clients, rounds = 3, 120 // 120 frames of 60 KB: 7 MB each
		var jobs []*pipelinesim.Job
		var conns []*websocket.Conn
		for i := range clients {
			id := fmt.Sprintf("slowjob%d", i)
			jobs = append(jobs, r.queueAndTake(t, id, fmt.Sprintf("http://slow%d.example/", i)))
			conns = append(conns, r.dial(t, r.main.URL, "?v=2&jobs="+id, ""))
			readV2(t, conns[i]) // hello
		}
		gate := make(chan struct{})
		block := func(*client) { <-gate }
		r.hub.beforeWrite.Store(&block)
		big := strings.Repeat("y", 60<<10)
		for k := 1; k <= rounds; k++ {
			for _, j := range jobs {
				j.Log(ctx, fmt.Sprintf(`{"type":"stdout","message":"%d %s"}`, k, big))
			}
			r.tap.waitFor(t, "entries", func() bool {
				for _, j := range jobs {
					if r.tap.logs[j.Ident] < k {
						return false
					}
				}
				return true
			})
			r.hub.Flush()
		}
		if q := r.hub.queued.Load(); q > clients*DefaultClientBytes {
			t.Errorf("%d bytes queued for %d clients, bound %d each", q, clients, DefaultClientBytes)
		}
		r.hub.beforeWrite.Store(nil)
		close(gate)
		for i, c := range conns {
			got, dropped := 0, 0
			for got+dropped < rounds {
				f := readV2(t, c)
				got += f.N
				dropped += f.Dropped
			}
			if dropped < rounds/3 || got > 4<<20/(60<<10)+1 {
				t.Errorf("client %d: %d entries received, told %d dropped; want at most 4 MiB held", i, got, dropped)
			}
		}
	})
}

// http.stream_listen serves upstream's protocol alone, as doc/web.md says
// (hardening II, finding 16): ?v=2 there is a 400 that names where it is.
func TestStreamListenUpstreamOnly(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, true)
		d := websocket.Dialer{}
		_, resp, err := d.Dial("ws"+strings.TrimPrefix(r.second.URL, "http")+"/stream?v=2", nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("?v=2 on stream_listen: %v, %v; want a 400", err, resp)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "http.listen") {
			t.Errorf("the refusal does not say where v2 is: %s", body)
		}
		r.dial(t, r.second.URL, "", "")     // upstream's protocol still is
		r.dial(t, r.second.URL, "?v=1", "") // by name too
		r.dial(t, r.main.URL, "?v=2", "")   // and ours on the main listener
	})
}
