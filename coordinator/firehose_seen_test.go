package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// Job events for idents that are no jobs (hardening II, finding 8: 500,000
// published "queued" events took the node from 82 to 354 MB for good) are
// forgotten once the firehose sees the jobs do not exist; a job that
// exists is still remembered, so its duplicate events are still dropped.
func TestFirehoseForgetsEventsOfJobsThatDoNotExist(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		now := time.Unix(1732900000, 0)
		sink := &sinkRec{entries: map[string][]store.LogEntry{}, jobs: map[string]map[string]string{}}
		f := NewFirehose(store.NewStore(b.Client), sink, FirehoseConfig{Now: func() time.Time { return now }}, svcLog(t))
		b.Client.HSet(ctx, "realjob", "url", "http://real.example/")
		f.emit(JobEvent{Ident: "realjob", Event: store.EventQueued})
		const junk = 3000
		for i := range junk {
			f.emit(JobEvent{Ident: fmt.Sprintf("evleak%d", i), Event: store.EventQueued})
		}
		if len(sink.events) != junk+1 {
			t.Fatalf("%d events passed on, want %d", len(sink.events), junk+1)
		}
		for range 3 {
			now = now.Add(time.Minute)
			f.watchWorking(ctx)
		}
		f.seenMu.Lock()
		n, real := len(f.seen), f.seen["realjob"] != nil
		f.seenMu.Unlock()
		if n != 1 || !real {
			t.Fatalf("the firehose remembers %d jobs (realjob: %v), want only realjob", n, real)
		}
		f.emit(JobEvent{Ident: "realjob", Event: store.EventQueued})
		if len(sink.events) != junk+1 {
			t.Errorf("a duplicate event of a remembered job was passed on")
		}
	})
}

// However many idents are published, the firehose remembers at most
// MaxSeen jobs; past that events are still passed on.
func TestFirehoseSeenBounded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		sink := &sinkRec{entries: map[string][]store.LogEntry{}, jobs: map[string]map[string]string{}}
		f := NewFirehose(store.NewStore(b.Client), sink, FirehoseConfig{MaxSeen: 100}, svcLog(t))
		for i := range 1000 {
			f.emit(JobEvent{Ident: fmt.Sprintf("evleak%d", i), Event: store.EventFinished})
		}
		if len(f.seen) != 100 || len(sink.events) != 1000 {
			t.Errorf("remembers %d jobs, passed on %d events; want 100 and 1000", len(f.seen), len(sink.events))
		}
	})
}
