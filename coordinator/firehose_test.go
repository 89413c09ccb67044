package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

type sinkRec struct {
	mu      sync.Mutex
	entries map[string][]record.LogEntry
	jobs    map[string]map[string]string
	events  []news.JobEvent
}

func newSinkRec() *sinkRec {
	return &sinkRec{entries: map[string][]record.LogEntry{}, jobs: map[string]map[string]string{}}
}

func (s *sinkRec) StreamLog(job *record.Job, es []record.LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[job.Ident] = append(s.entries[job.Ident], es...)
	s.jobs[job.Ident] = job.Fields
}

func (s *sinkRec) StreamEvent(ev news.JobEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
}

// TestFirehoseBroadcast: entries past last_broadcasted_log_entry go to the
// sink with the job hash, then the bookmark and ts are written as
// upstream's firehose did; a second call sends nothing new; an expired job
// is not re-created; a finished job's end follows its last entries, once.
func TestFirehoseBroadcast(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		seedLog(t, b.Client, "fhjob", 7)
		b.Client.HSet(ctx, "fhjob", "url", "http://fh.example/", "last_broadcasted_log_entry", "2")
		sink := newSinkRec()
		now := time.Unix(1732900000, 500_000_000)
		f := NewFirehose(store.New(b.Client), sink, FirehoseConfig{Batch: 3, Now: func() time.Time { return now }}, svcLog(t))
		if err := f.Broadcast(ctx, "fhjob"); err != nil {
			t.Fatal(err)
		}
		if got := len(sink.entries["fhjob"]); got != 5 || sink.entries["fhjob"][0].Score != 3 {
			t.Fatalf("streamed %d entries from %v, want 5 from score 3", got, sink.entries["fhjob"])
		}
		if sink.jobs["fhjob"]["url"] != "http://fh.example/" {
			t.Errorf("job hash %v", sink.jobs["fhjob"])
		}
		h := b.Client.HMGet(ctx, "fhjob", "last_broadcasted_log_entry", "ts").Val()
		if h[0] != "7" || h[1] != "1732900000.5" {
			t.Errorf("bookmark and ts %v, want 7 and 1732900000.5", h)
		}
		if err := f.Broadcast(ctx, "fhjob"); err != nil || len(sink.entries["fhjob"]) != 5 {
			t.Errorf("second broadcast: %v, %d entries", err, len(sink.entries["fhjob"]))
		}
		if len(sink.events) != 0 {
			t.Errorf("events for a running job: %v", sink.events)
		}
		b.Client.HSet(ctx, "fhjob", "finished_at", "1732900001.5", "aborted", "true")
		f.Broadcast(ctx, "fhjob")
		f.Broadcast(ctx, "fhjob")
		if len(sink.events) != 1 || sink.events[0].Event != store.EventAborted || sink.events[0].TS != 1732900001.5 {
			t.Errorf("end events %+v, want one aborted", sink.events)
		}

		// A log whose job expired: nothing streamed, nothing created.
		seedLog(t, b.Client, "gonefh", 3)
		b.Client.Del(ctx, "gonefh")
		if err := f.Broadcast(ctx, "gonefh"); err != nil || len(sink.entries["gonefh"]) != 0 {
			t.Errorf("expired job: %v, %v", err, sink.entries["gonefh"])
		}
		if n := b.Client.Exists(ctx, "gonefh").Val(); n != 0 {
			t.Error("the firehose re-created an expired job")
		}
		moved, err := store.New(b.Client).MarkBroadcastMany(ctx, []store.BroadcastMark{{Ident: "fhjob", From: "3", To: 9, Now: 1}})
		if err != nil || len(moved) != 1 || moved[0] {
			t.Errorf("MarkBroadcastMany from a stale bookmark: %v %v", moved, err)
		}
	})
}

// Job events for idents that are no jobs (500,000
// published "queued" events took the node from 82 to 354 MB for good) are
// forgotten once the firehose sees the jobs do not exist; a job that
// exists is still remembered, so its duplicate events are still dropped.
func TestFirehoseForgetsEventsOfJobsThatDoNotExist(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		now := time.Unix(1732900000, 0)
		sink := newSinkRec()
		f := NewFirehose(s, sink, FirehoseConfig{Now: func() time.Time { return now }}, svcLog(t))
		b.Client.HSet(ctx, "realjob", "url", "http://real.example/")
		f.emit(news.JobEvent{Ident: "realjob", Event: store.EventQueued})
		const junk = 3000
		for i := range junk {
			f.emit(news.JobEvent{Ident: fmt.Sprintf("evleak%d", i), Event: store.EventQueued})
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
		f.emit(news.JobEvent{Ident: "realjob", Event: store.EventQueued})
		if len(sink.events) != junk+1 {
			t.Errorf("a duplicate event of a remembered job was passed on")
		}
	})
}

// However many idents are published, the firehose remembers at most
// MaxSeen jobs; past that events are still passed on.
func TestFirehoseSeenBounded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		sink := newSinkRec()
		f := NewFirehose(store.New(b.Client), sink, FirehoseConfig{MaxSeen: 100}, svcLog(t))
		for i := range 1000 {
			f.emit(news.JobEvent{Ident: fmt.Sprintf("evleak%d", i), Event: store.EventFinished})
		}
		if len(f.seen) != 100 || len(sink.events) != 1000 {
			t.Errorf("remembers %d jobs, passed on %d events; want 100 and 1000", len(f.seen), len(sink.events))
		}
	})
}
