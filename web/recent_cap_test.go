package web

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// TestRecentAnswerCapped: a /logs/recent
// answer stays within RecentMaxBytes however big the pipelines' entries
// are (30 requests for 6.5 MB answers took the node to 239 MB); each job
// keeps its newest entries, and the answer says how many were left out.
func TestRecentAnswerCapped(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	st := store.New(b.Client)
	const jobs, perJob, capBytes = 20, 10, 100 << 10
	for i := range jobs {
		id := fmt.Sprintf("capjob%02d", i)
		b.Client.HSet(ctx, id, "url", "http://example.com/"+id, "started_at", "1")
		b.Client.RPush(ctx, store.KeyWorking, id)
	}
	big := strings.Repeat("x", 2000)
	recent := func(ident string, n int) []record.LogEntry {
		out := make([]record.LogEntry, 0, n)
		for k := perJob - n; k < perJob; k++ {
			doc := fmt.Sprintf(`{"type":"stdout","ts":1,"message":"%s %d %s"}`, ident, k, big)
			out = append(out, record.LogEntry{Doc: doc, Score: float64(k + 1), Kind: record.EntryObject, Type: "stdout"})
		}
		return out
	}
	h := New(Options{Store: st, RecentAPI: recent, RecentMaxBytes: capBytes}).Handler()
	r := get(t, h, "/logs/recent", "application/json")
	text := body(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("status %d: %.200s", r.StatusCode, text)
	}
	if len(text) > capBytes {
		t.Errorf("answer of %d bytes, over the cap of %d", len(text), capBytes)
	}
	var got []struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatal(err)
	}
	omitted, _ := strconv.Atoi(r.Header.Get("X-ArchiveBot-Omitted-Entries"))
	if omitted == 0 || omitted+len(got) != jobs*perJob {
		t.Errorf("%d entries sent and %d said left out, want %d in all", len(got), omitted, jobs*perJob)
	}
	newest := map[string]bool{}
	for _, e := range got {
		f := strings.Fields(e.Message)
		if f[1] == strconv.Itoa(perJob-1) {
			newest[f[0]] = true
		}
	}
	if len(newest) != jobs {
		t.Errorf("%d jobs have their newest entry in the answer, want all %d", len(newest), jobs)
	}
}
