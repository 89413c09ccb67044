package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/record"
)

// TestQueueShedsByAgeOnPush: a client that does not read holds at most
// the frames of the latency budget, not its byte limit: frames that would
// be shed when sent are shed as soon as a newer frame shows them too old.
// (100 slow v2 clients with their own subscriptions
// held 4 MiB each until a send.)
func TestQueueShedsByAgeOnPush(t *testing.T) {
	hub := NewHub(HubOptions{Logger: quietLogger()})
	var total atomic.Int64
	c := idleClient(hub, true, queueLimits{frames: 256, bytes: 4 << 20, total: &total,
		maxTot: 256 << 20, maxAge: time.Second})
	t0 := time.Unix(1_700_000_000, 0)
	// 10 s of frames, 10 per second, 10 KB each; nobody reads.
	for i := range 100 {
		c.pushLogs([]qframe{{n: 5, size: 10_000, at: t0.Add(time.Duration(i) * 100 * time.Millisecond)}})
	}
	// Within the budget of the newest frame (9.9 s): those read at 8.9 s
	// or later, 11 frames.
	if n := c.logs.len(); n > 11 {
		t.Fatalf("client holds %d frames (%d bytes) of 10 s; want at most the last second's 11", n, c.bytes)
	}
	if c.bytes != int(total.Load()) || c.bytes != c.logs.len()*10_000 {
		t.Fatalf("bytes %d, counted in total %d, frames %d", c.bytes, total.Load(), c.logs.len())
	}
	if c.dropped != 5*(100-c.logs.len()) {
		t.Fatalf("dropped %d entries, want %d: every shed entry is counted", c.dropped, 5*(100-c.logs.len()))
	}
}

// TestBatchSplitIntoBoundedFrames: a batch that piled up (1,200 entries
// of 1 KB for one v2 client with its own subscription) goes out as several
// frames of at most 500 entries and about 256 KiB, every entry once, in
// order; the client's frames are its own bytes (not prepared messages,
// which would hold a second copy).
func TestBatchSplitIntoBoundedFrames(t *testing.T) {
	hub := NewHub(HubOptions{Logger: quietLogger()})
	c := idleClient(hub, true, queueLimits{frames: 256, bytes: 64 << 20, total: &hub.queued,
		maxTot: 256 << 20, maxAge: time.Hour})
	c.setFilter(false, []string{"splitjob"}, false)
	hub.clients[c] = struct{}{}
	pad := strings.Repeat("x", 1000)
	var entries []record.LogEntry
	for i := range 1200 {
		entries = append(entries, record.NewLogEntry(fmt.Sprintf(`{"type":"download","url":"http://x.example/%d","pad":"%s"}`, i, pad), float64(i+1)))
	}
	hub.StreamLog(record.DecodeJob("splitjob", map[string]string{"url": "http://x.example/"}), entries)
	if n := hub.Flush(); n != 1200 {
		t.Fatalf("flushed %d entries", n)
	}
	next := 1
	frames := 0
	for {
		f, _, ok := c.next(time.Now())
		if !ok {
			break
		}
		frames++
		if f.pm != nil || f.raw == nil {
			t.Fatalf("frame %d: a prepared message for a filter only one client has", frames)
		}
		if f.n > maxFrameEntries || len(f.raw) > maxFrameBytes+64<<10 {
			t.Fatalf("frame %d: %d entries, %d bytes", frames, f.n, len(f.raw))
		}
		var doc struct {
			N       int `json:"n"`
			Entries []struct {
				Score float64 `json:"score"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(f.raw, &doc); err != nil || doc.N != f.n || len(doc.Entries) != f.n {
			t.Fatalf("frame %d: n %d, %d entries, %v", frames, doc.N, len(doc.Entries), err)
		}
		for _, e := range doc.Entries {
			if int(e.Score) != next {
				t.Fatalf("frame %d: entry %v, want %d", frames, e.Score, next)
			}
			next++
		}
	}
	if next != 1201 || frames < 5 {
		t.Fatalf("%d entries in %d frames, want 1200 in at least 5 (256 KiB each)", next-1, frames)
	}
}
