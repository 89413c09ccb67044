package coordinator

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// TestDrainAcksWhileTaking: a notice whose line the front end reports
// written is acknowledged at once, while the cycle is still taking and
// handing over later notices, not once the whole cycle was handed over.
//
// This was the flake of TestE2EFinishNoticesSurviveKill ("round 2: 4
// duplicates … want at most those of the line in flight"): the cycle
// acknowledged nothing until its take loop ended, and the take loop (one
// take and the job-end bookkeeping per notice) was slower under load than
// the front end writing lines, so a kill repeated every line written
// during it, one duplicate per line; a notice left over from an earlier
// kill and written again in such a cycle came a third time.
func TestDrainAcksWhileTaking(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		urls := []string{"http://a.example.com/", "http://b.example.com/", "http://c.example.com/"}
		var docs []string
		for _, u := range urls {
			docs = append(docs, svcNotice(u, "alice", "#ab", false))
			b.Client.RPush(ctx, store.KeyFinishNotifications, docs[len(docs)-1])
		}
		ann := &batchAnnouncer{svcAnnouncer: *newSvcAnnouncer("#ab"), got: make(chan batchCall, 10)}
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))
		// While the cycle takes the second notice, the first one's line
		// is written (answered below): its acknowledgement must not wait
		// for the cycle.
		ackedWhileTaking := make(chan bool, 1)
		f.onNotice = func(_ context.Context, id string) {
			if id != ident.Of(urls[1]) {
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if !slices.Contains(svcLists(t, b)[1], docs[0]) {
					ackedWhileTaking <- true
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			ackedWhileTaking <- false
		}
		errc := make(chan error, 1)
		go func() { errc <- f.runOnce(ctx) }()
		(<-ann.got).done(nil)
		if !<-ackedWhileTaking {
			t.Error("the first notice's line was written, but it was not acknowledged while the cycle took the next one")
		}
		for range 2 {
			(<-ann.got).done(nil)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if l := svcLists(t, b); len(l[0]) != 0 || len(l[1]) != 0 {
			t.Fatalf("after the cycle: queue %v, processing %v; want both empty", l[0], l[1])
		}
	})
}

// connectingAnnouncer is a front end that is still connecting: Announce
// fails until connect, and WaitConnected waits for it (as the IRC client
// does), telling the test when a wait begins.
type connectingAnnouncer struct {
	*svcAnnouncer
	up      chan struct{}
	waiting chan struct{}
}

func (a *connectingAnnouncer) WaitConnected(ctx context.Context) bool {
	a.waiting <- struct{}{}
	select {
	case <-a.up:
		return true
	case <-ctx.Done():
		return false
	}
}

func (a *connectingAnnouncer) connect() {
	a.setDown(nil)
	close(a.up)
}

// TestDrainWaitsForConnect: the first cycle after a start waits for the
// front end to connect (its WaitConnected signal, no polling) before it
// hands over the notices an earlier run left, so they go out in that
// cycle instead of failing on the first and waiting for the next.
func TestDrainWaitsForConnect(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		url := "http://left.example.com/"
		b.Client.RPush(ctx, store.KeyFinishProcessing, svcNotice(url, "a", "#ab", false))
		ann := &connectingAnnouncer{svcAnnouncer: newSvcAnnouncer("#ab"), up: make(chan struct{}), waiting: make(chan struct{}, 1)}
		ann.setDown(errIRCDown)
		f := NewFinishNotifier(store.New(b.Client), ann, FinishConfig{}, svcLog(t))
		done := make(chan error, 1)
		go func() { done <- f.runOnce(ctx) }()
		select {
		case <-ann.waiting:
		case err := <-done:
			t.Fatalf("the cycle ended (%v) without waiting for the front end to connect", err)
		}
		ann.connect()
		if err := <-done; err != nil {
			t.Fatalf("cycle after the connect: %v", err)
		}
		want := []svcLine{{"#ab", fmt.Sprintf("a: Your job for %s has finished. (%s)", url, ident.Of(url))}}
		if diff := cmp.Diff(want, ann.take()); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
	})
}
