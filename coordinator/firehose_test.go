package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

type sinkRec struct {
	mu      sync.Mutex
	entries map[string][]store.LogEntry
	jobs    map[string]map[string]string
	events  []JobEvent
}

func (s *sinkRec) StreamLog(job *store.Job, es []store.LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[job.Ident] = append(s.entries[job.Ident], es...)
	s.jobs[job.Ident] = job.Fields
}

func (s *sinkRec) StreamEvent(ev JobEvent) {
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
		sink := &sinkRec{entries: map[string][]store.LogEntry{}, jobs: map[string]map[string]string{}}
		now := time.Unix(1732900000, 500_000_000)
		f := NewFirehose(store.NewStore(b.Client), sink, FirehoseConfig{Batch: 3, Now: func() time.Time { return now }}, svcLog(t))
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
		ok, err := store.NewStore(b.Client).MarkBroadcast(ctx, "fhjob", "3", 9, 1)
		if err != nil || ok {
			t.Errorf("MarkBroadcast from a stale bookmark: %v %v", ok, err)
		}
	})
}
