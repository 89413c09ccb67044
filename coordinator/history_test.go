package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// historyOf is the job's history as "event by WHO" strings.
func historyOf(t *testing.T, s *store.Store, id string) []string {
	t.Helper()
	es, err := s.History(context.Background(), id, store.HistoryMax)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Event + " by " + e.By
	}
	return out
}

// jobEvents subscribes to archivebot:job_events and returns, on each call,
// what it got so far for the job ident. Pub/sub ignores the database
// index, so events of other packages' tests running on the same server
// are left out.
func jobEvents(t *testing.T, b *redistest.Backend) func(n int, ident string) []string {
	t.Helper()
	ctx := context.Background()
	ps := b.Client.Subscribe(ctx, store.ChannelJobEvents)
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	ch := ps.Channel()
	var got []string
	return func(n int, ident string) []string {
		for len(got) < n {
			select {
			case m := <-ch:
				if strings.Contains(m.Payload, `"ident":"`+ident+`"`) {
					got = append(got, m.Payload)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("got %d job events, want %d: %q", len(got), n, got)
			}
		}
		return got
	}
}

// TestJobHistory drives one job through queue, three settings changes by
// two users, start, abort and the pipeline's finish, and checks that the
// history lists every step with who did it, that every entry was also
// published on archivebot:job_events, and that the list expires with the
// job.
func TestJobHistory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		events := jobEvents(t, b)
		id := svcQueue(t, s, "http://history.example.com/", "alice", "#ab", store.KeyPending)
		changes := []store.Change{
			{Bump: 1, By: "alice", Set: map[string]string{"delay_min": "0", "delay_max": "0"}},
			{Bump: 1, By: "bob", Set: map[string]string{"concurrency": "5"}},
			{Bump: 1, By: "alice", AddPatterns: []string{"/calendar/"}},
		}
		for _, c := range changes {
			if _, err := s.ChangeSettings(ctx, id, c); err != nil {
				t.Fatal(err)
			}
		}
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "hist-pipe"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		j := mustTake(t, ctx, p)
		if _, err := s.ScanStarts(ctx, true); err != nil {
			t.Fatal(err)
		}
		if res, _, err := s.AbortBy(ctx, id, "bob"); err != nil || res != store.AbortRequested {
			t.Fatalf("abort: %v %v", res, err)
		}
		if err := j.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		ann := newSvcAnnouncer("#ab")
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		// A notice delivered again (a crash before its acknowledgement)
		// appends nothing more.
		if err := s.RecordJobEnd(ctx, id, true, p.Key()); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"queued by alice", "settings by alice", "settings by bob", "ignore_added by alice",
			"started by " + p.Key(), "aborted by bob", "aborted by " + p.Key(),
		}
		if diff := cmp.Diff(want, historyOf(t, s, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		if d, err := s.JobDetail(ctx, id); err != nil || d == nil || len(d.History) != len(want) {
			t.Errorf("JobDetail history: %+v %v", d, err)
		}
		es, _ := s.History(ctx, id, store.HistoryMax)
		if es[4].Detail["pipeline"] != "hist-pipe" || es[1].Detail["set"] == nil {
			t.Errorf("details: started %v, settings %v", es[4].Detail, es[1].Detail)
		}
		published := events(len(want), id)
		raw, _ := b.Client.LRange(ctx, store.KeyHistory(id), 0, -1).Result()
		if diff := cmp.Diff(raw, published); diff != "" {
			t.Errorf("published events differ from the history (-history +published):\n%s", diff)
		}
		// The list expires with the job: an aborted job's record lives 5 s,
		// its history as long as a failure record.
		ttl, _ := b.Client.TTL(ctx, store.KeyHistory(id)).Result()
		if ttl <= store.HistoryEndedTTL-time.Minute || ttl > store.HistoryEndedTTL {
			t.Errorf("history TTL %v, want about %v", ttl, store.HistoryEndedTTL)
		}
		if otl, _ := b.Client.TTL(ctx, store.KeyOrigin(id)).Result(); otl <= 0 {
			t.Errorf("origin record TTL %v, want one", otl)
		}
		if b.Mini != nil {
			b.Mini.FastForward(store.HistoryEndedTTL + time.Second)
			if n, _ := b.Client.Exists(ctx, store.KeyHistory(id), store.KeyOrigin(id)).Result(); n != 0 {
				t.Errorf("history or origin still there after their TTL")
			}
		}
	})
}

// TestJobHistoryFinished: a finished job's history lives as long as its
// record (48 h), and !expire keeps it (with an "expired" entry).
func TestJobHistoryFinished(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := svcQueue(t, s, "http://finished.example.com/", "carol", "#ab", store.KeyPendingAO)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"})
		j := mustTake(t, ctx, p)
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		if err := NewFinishNotifier(s, newSvcAnnouncer("#ab"), FinishConfig{}, svcLog(t)).runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.ExpireBy(ctx, id, "dave"); err != nil {
			t.Fatal(err)
		}
		// The job finished before any scan saw it start: no "started".
		want := []string{"queued by carol", "finished by " + p.Key(), "expired by dave"}
		if diff := cmp.Diff(want, historyOf(t, s, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		ttl, _ := b.Client.TTL(ctx, store.KeyHistory(id)).Result()
		if ttl <= store.HistoryFinishedTTL-time.Minute || ttl > store.HistoryFinishedTTL {
			t.Errorf("history TTL %v, want about %v", ttl, store.HistoryFinishedTTL)
		}
		if n, _ := b.Client.Exists(ctx, store.KeyOrigin(id)).Result(); n != 0 {
			t.Errorf("origin record kept after !expire")
		}
	})
}

// TestHistoryCapped: at most HistoryMax entries, the newest kept.
func TestHistoryCapped(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	s := store.New(b.Client)
	id := svcQueue(t, s, "http://capped.example.com/", "alice", "#ab", store.KeyPending)
	for i := 0; i < store.HistoryMax+20; i++ {
		if _, err := s.ChangeSettings(ctx, id, store.Change{Bump: 1, By: fmt.Sprintf("u%d", i), Set: map[string]string{"concurrency": "2"}}); err != nil {
			t.Fatal(err)
		}
	}
	h := historyOf(t, s, id)
	if len(h) != store.HistoryMax || h[len(h)-1] != fmt.Sprintf("settings by u%d", store.HistoryMax+19) {
		t.Fatalf("history has %d entries, last %q", len(h), h[len(h)-1])
	}
}

// TestUserAgentQueuedOnly: the user agent of a queued job changes (history
// "useragent"); a running job's is refused with nothing written.
func TestUserAgentQueuedOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := svcQueue(t, s, "http://ua.example.com/", "alice", "#ab", store.KeyPending)
		ch := store.Change{QueuedOnly: true, Event: store.EventUserAgent, By: "bob", Set: map[string]string{"user_agent": "UA/1"}}
		if _, err := s.ChangeSettings(ctx, id, ch); err != nil {
			t.Fatal(err)
		}
		if ua, _ := b.Client.HGet(ctx, id, "user_agent").Result(); ua != "UA/1" {
			t.Fatalf("user_agent %q", ua)
		}
		if h := historyOf(t, s, id); h[len(h)-1] != "useragent by bob" {
			t.Errorf("history %q", h)
		}
		if _, err := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"}).Take(ctx); err != nil {
			t.Fatal(err)
		}
		ch.Set["user_agent"] = "UA/2"
		writesNothing(t, b, "refused change wrote", func() {
			if _, err := s.ChangeSettings(ctx, id, ch); !errors.Is(err, store.ErrJobStarted) {
				t.Fatalf("change of a running job: %v", err)
			}
		})
	})
}
