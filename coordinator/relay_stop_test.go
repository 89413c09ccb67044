package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/faultstore"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// TestFirehoseRelayStopCountsQueuedEvents: job events that wait for the
// events relayer when the firehose stops (its term ends, the lease moved)
// are never appended; they are counted (event_failed), the one whose
// append the stop cut short too, not dropped silently. An event emitted
// after the stop is counted as well and queues nothing.
func TestFirehoseRelayStopCountsQueuedEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		fs := faultstore.New(s)
		g := fs.Hold("RelayBroadcast")
		defer g.Open()
		f := NewFirehose(fs, nil, FirehoseConfig{Relay: true, WorkingInterval: time.Hour}, svcLog(t))
		f.Start(ctx)
		ev := func(id string) news.JobEvent { return news.JobEvent{Ident: id, Event: store.EventQueued} }
		lost0 := relayLostCount(t, "event_failed")
		f.emit(ev("stopev1"))
		select {
		case <-g.Waiting(): // the relayer's append of stopev1 waits
		case <-time.After(10 * time.Second):
			t.Fatal("the events relayer never appended")
		}
		f.emit(ev("stopev2"))
		f.emit(ev("stopev3"))
		f.Stop()
		if d := relayLostCount(t, "event_failed") - lost0; d != 3 {
			t.Errorf("event_failed counted %v at the stop, want 3 (one cut short, two queued)", d)
		}
		f.emit(ev("stopev4"))
		if d := relayLostCount(t, "event_failed") - lost0; d != 4 {
			t.Errorf("event_failed counted %v after an emit past the stop, want 4", d)
		}
		f.evMu.Lock()
		q := len(f.evq)
		f.evMu.Unlock()
		if q != 0 {
			t.Errorf("%d events left queued after the stop", q)
		}
	})
}
