package web

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/record"
)

// hubHas reports whether the hub holds n entries of ident, not flushed
// yet. (The listener tells the hub a message's count of dropped entries
// before it hands over the message's entries.)
func (h *Hub) hubHas(ident string, n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := 0
	for _, e := range h.entries {
		if e.job.ident == ident {
			k++
		}
	}
	return k == n
}

// TestStreamRelayDroppedTold: the API log entries the leader's publisher
// drops (its queue full) are told to every client of our protocol
// subscribed to the job, through Redis and the listener: a relay_dropped
// notice with the number dropped, before the frames of the entries that
// went through; a client subscribed to another job is not told.
func TestStreamRelayDroppedTold(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, true)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		t.Cleanup(func() { cancel(); wg.Wait() })
		cfg := coordinator.APILogConfig{QueueEntries: 25}
		pub := coordinator.NewAPILogPublisher(r.store, cfg, quietLogger())
		l := coordinator.NewAPILogListener(r.store, r.hub, cfg, quietLogger())
		wg.Add(1)
		go func() { defer wg.Done(); l.Run(ctx) }()
		<-l.Ready()
		all := r.dialV2(t, "")
		other := r.dialV2(t, "&jobs=rdother")

		job := func(id string) *record.Job {
			return record.DecodeJob(id, map[string]string{"url": "http://" + id + ".example/"})
		}
		for i := 0; i < 10; i++ { // 30 entries: the last two updates (6) do not fit
			es := make([]record.LogEntry, 3)
			for k := range es {
				s := 1 + 3*i + k
				es[k] = record.NewLogEntry(fmt.Sprintf(`{"type":"stdout","message":"line %d\n"}`, s), float64(s))
			}
			pub.StreamLog(job("rdjob"), es)
		}
		wg.Add(1)
		go func() { defer wg.Done(); pub.Run(ctx) }()
		testproc.Eventually(t, "the entries to reach the hub", func() bool { return r.hub.hubHas("rdjob", 24) })
		r.hub.Flush()

		told, got := 0, 0
		for got < 24 {
			f := readV2(t, all)
			told += f.RelayDropped["rdjob"]
			for _, e := range f.Entries {
				if e["ident"] == "rdjob" {
					if told != 6 {
						t.Fatalf("an entry of rdjob before the notice of its 6 dropped (told %d)", told)
					}
					got++
				}
			}
		}
		if told != 6 {
			t.Errorf("told %d dropped, want 6", told)
		}

		// The client subscribed to another job: its next frame is its own
		// job's entry, no notice of rdjob's drops.
		pub.StreamLog(job("rdother"), []record.LogEntry{record.NewLogEntry(`{"type":"stdout","message":"x\n"}`, 1)})
		testproc.Eventually(t, "rdother's entry to reach the hub", func() bool { return r.hub.hubHas("rdother", 1) })
		r.hub.Flush()
		f := readV2(t, other)
		if f.RelayDropped != nil || len(f.Entries) != 1 || f.Entries[0]["ident"] != "rdother" {
			t.Errorf("the client of rdother got %+v first, want its entry", f)
		}
	})
}
