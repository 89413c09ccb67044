package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

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
