package coordinator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/faultstore"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// relayMetric is the value of the counter series name{label="value"}
// (the relay's and the API log's counters).
func relayMetric(t testing.TB, name, label, value string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

func relayLostCount(t testing.TB, reason string) float64 {
	return relayMetric(t, "archivebot_stream_relay_lost_total", "reason", reason)
}

// startReader runs a relay reader into a new sink until the test ends and
// waits until it knows where the relay ends.
func startReader(t *testing.T, s Store) (*RelayReader, *sinkRec) {
	t.Helper()
	sink := newSinkRec()
	r := NewRelayReader(s, sink, svcLog(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-r.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the relay reader never got ready")
	}
	return r, sink
}

func (s *sinkRec) scoresOf(ident string) []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []float64
	for _, e := range s.entries[ident] {
		out = append(out, e.Score)
	}
	return out
}

func (s *sinkRec) eventsOf(ident string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		if e.Ident == ident {
			out = append(out, e.Event)
		}
	}
	return out
}

// TestFirehoseRelay: under Relay the leader's firehose hands nothing to
// its own sink; every reader (two nodes) gets the entries past the
// bookmark once, in order, with the job's record, and the end event after
// them. A node that lost the lease appends nothing and moves nothing
// (fenced). A second firehose (the next leader) resumes from the
// bookmarks the first moved with its last append: the readers' entries
// stay 1..N, none repeated, none missing.
func TestFirehoseRelay(t *testing.T) {
	t.Parallel() // it mostly waits on the relay's readers: time the CPU can spend elsewhere
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		_, nodeA := startReader(t, s)
		_, nodeB := startReader(t, s)
		seedLog(t, b.Client, "rljob", 7)
		own := newSinkRec()
		f := NewFirehose(s, own, FirehoseConfig{Batch: 3, Relay: true}, svcLog(t))
		if err := f.Broadcast(ctx, "rljob"); err != nil {
			t.Fatal(err)
		}
		want := func(what string, n int) {
			t.Helper()
			for name, sink := range map[string]*sinkRec{"node A": nodeA, "node B": nodeB} {
				testproc.Eventually(t, fmt.Sprintf("%s to get %d entries (%s)", name, n, what), func() bool {
					return len(sink.scoresOf("rljob")) >= n
				})
				got := sink.scoresOf("rljob")
				if len(got) != n {
					t.Errorf("%s (%s): scores %v, want 1..%d", name, what, got, n)
				}
				for i, sc := range got {
					if sc != float64(i+1) {
						t.Errorf("%s (%s): scores %v, want 1..%d", name, what, got, n)
						break
					}
				}
				sink.mu.Lock()
				url := sink.jobs["rljob"]["url"]
				sink.mu.Unlock()
				if url != "http://example.com/" {
					t.Errorf("%s: the job's record %q", name, url)
				}
			}
		}
		want("first leader", 7)
		if len(own.entries) != 0 || len(own.events) != 0 {
			t.Errorf("the firehose's own sink got %v %v under Relay", own.entries, own.events)
		}
		if bm := b.Client.HGet(ctx, "rljob", "last_broadcasted_log_entry").Val(); bm != "7" {
			t.Errorf("bookmark %q, want 7", bm)
		}

		// A node that lost the lease: nothing appended, nothing moved.
		b.Client.ZAdd(ctx, store.KeyLog("rljob"), redis.Z{Score: 8, Member: `{"type":"stdout","message":"8","ts":1}`},
			redis.Z{Score: 9, Member: `{"type":"stdout","message":"9","ts":1}`})
		b.Client.Set(ctx, store.KeyLeader, "2 node-b 1", 0)
		before := b.Client.XLen(ctx, store.KeyStreamRelay).Val()
		err := f.Broadcast(store.WithFence(ctx, "1 node-a 1"), "rljob")
		if err == nil || !strings.Contains(err.Error(), "FENCED") {
			t.Errorf("a fenced broadcast: %v, want FENCED", err)
		}
		if n := b.Client.XLen(ctx, store.KeyStreamRelay).Val(); n != before {
			t.Errorf("a fenced broadcast appended: %d messages, was %d", n, before)
		}
		if bm := b.Client.HGet(ctx, "rljob", "last_broadcasted_log_entry").Val(); bm != "7" {
			t.Errorf("a fenced broadcast moved the bookmark to %q", bm)
		}

		// The next leader resumes from the bookmark; the end follows.
		b.Client.HSet(ctx, "rljob", "finished_at", "1732900001.5")
		next := NewFirehose(s, own, FirehoseConfig{Batch: 3, Relay: true}, svcLog(t))
		if err := next.Broadcast(store.WithFence(ctx, "2 node-b 1"), "rljob"); err != nil {
			t.Fatal(err)
		}
		want("next leader", 9)
		for name, sink := range map[string]*sinkRec{"node A": nodeA, "node B": nodeB} {
			testproc.Eventually(t, name+" to get the finished event", func() bool { return len(sink.eventsOf("rljob")) > 0 })
			if ev := sink.eventsOf("rljob"); len(ev) != 1 || ev[0] != store.EventFinished {
				t.Errorf("%s: events %v, want [finished]", name, ev)
			}
		}
	})
}

// TestRelayReaderRefuses: the relay is a Redis stream anyone who can
// write to Redis can append to. A message that is not JSON, one with too
// many entries, entries without a job record and events without an ident
// are refused and counted (bad_message), the good entries of a message
// still go through; a gap in the message numbers (messages trimmed
// before the node read them) is counted as trimmed.
func TestRelayReaderRefuses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		_, sink := startReader(t, s)
		bad0, trim0 := relayLostCount(t, "bad_message"), relayLostCount(t, "trimmed")
		add := func(n int, body string) {
			t.Helper()
			if err := b.Client.XAdd(ctx, &redis.XAddArgs{Stream: store.KeyStreamRelay, Values: []any{"m", body, "n", n}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var many strings.Builder
		many.WriteString(`{"jobs":{"rr":{"url":"u"}},"entries":[`)
		for i := range relayMessageEntries + 1 {
			if i > 0 {
				many.WriteString(",")
			}
			fmt.Fprintf(&many, `{"ident":"rr","score":%d,"doc":"{}"}`, i+1)
		}
		many.WriteString("]}")
		add(1, "not json")
		add(2, many.String())
		add(3, `{"jobs":{"rr":{"url":"u"}},"entries":[{"ident":"rr","score":1,"doc":"{\"type\":\"stdout\"}"},{"ident":"nojob","score":1,"doc":"{}"}],"events":[{"ident":"","event":"started"},{"ident":"rr","event":"started"}]}`)
		add(7, `{"jobs":{"rr":{"url":"u"}},"entries":[{"ident":"rr","score":2,"doc":"{}"}]}`) // 4..6 trimmed
		testproc.Eventually(t, "the good entries and event to go through", func() bool {
			return len(sink.scoresOf("rr")) == 2 && len(sink.eventsOf("rr")) == 1
		})
		if d := relayLostCount(t, "bad_message") - bad0; d < 4 {
			t.Errorf("bad_message counted %v, want at least 4 (not JSON, too many entries, no job record, no ident)", d)
		}
		if d := relayLostCount(t, "trimmed") - trim0; d != 3 {
			t.Errorf("trimmed counted %v, want 3 (messages 4..6)", d)
		}
		if got := sink.scoresOf("rr"); got[0] != 1 || got[1] != 2 {
			t.Errorf("entries %v", got)
		}
	})
}

// TestFirehoseRelayLargeRead: one read of three jobs with 3 MiB of
// entries each is relayed in more than one script call (at most about
// relayCallBytes each, whole jobs), not one command carrying 9 MiB; every
// entry reaches the reader once, in order, and every bookmark moves.
func TestFirehoseRelayLargeRead(t *testing.T) {
	t.Parallel() // it mostly waits on the relay's reader: time the CPU can spend elsewhere
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		_, node := startReader(t, s)
		fs := faultstore.New(s)
		pad := strings.Repeat("x", 60<<10)
		ids := []string{"bigrelay1", "bigrelay2", "bigrelay3"}
		const per = 50 // 50 × 60 KiB = 3 MiB a job
		for _, id := range ids {
			zs := make([]redis.Z, per)
			for i := range zs {
				zs[i] = redis.Z{Score: float64(i + 1), Member: fmt.Sprintf(`{"type":"stdout","message":"%d %s","ts":1}`, i+1, pad)}
			}
			b.Client.ZAdd(ctx, store.KeyLog(id), zs...)
			b.Client.HSet(ctx, id, "url", "http://"+id+".example/", "log_score", per)
		}
		f := NewFirehose(fs, nil, FirehoseConfig{Relay: true}, svcLog(t))
		if err := f.broadcastMany(ctx, ids); err != nil {
			t.Fatal(err)
		}
		if n := fs.Calls("RelayBroadcast"); n < 2 {
			t.Errorf("%d script calls for 9 MiB of entries, want at least 2", n)
		}
		for _, id := range ids {
			testproc.Eventually(t, "the reader to get "+id+"'s entries", func() bool { return len(node.scoresOf(id)) >= per })
			got := node.scoresOf(id)
			if len(got) != per || got[0] != 1 || got[per-1] != per {
				t.Errorf("%s: %d entries, from %v", id, len(got), got[:min(3, len(got))])
			}
			if bm := b.Client.HGet(ctx, id, "last_broadcasted_log_entry").Val(); bm != fmt.Sprint(per) {
				t.Errorf("%s: bookmark %q, want %d", id, bm, per)
			}
		}
	})
}

var _ news.StreamSink = (*sinkRec)(nil)
