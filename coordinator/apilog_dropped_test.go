package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// dropSink is a recording sink that is also told the publisher's counts
// of dropped entries (a DropSink, as the stream hub).
type dropSink struct {
	*sinkRec
	dmu      sync.Mutex
	dropped  map[string]int
	tellings int
}

func (d *dropSink) StreamDropped(m map[string]int) {
	d.dmu.Lock()
	defer d.dmu.Unlock()
	for id, n := range m {
		d.dropped[id] += n
	}
	d.tellings++
}

func (d *dropSink) told(ident string) int {
	d.dmu.Lock()
	defer d.dmu.Unlock()
	return d.dropped[ident]
}

// startDropRelay is startRelay with a dropSink.
func startDropRelay(t *testing.T, s Store, pub *APILogPublisher, cfg APILogConfig) *dropSink {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	sink := &dropSink{sinkRec: newSinkRec(), dropped: map[string]int{}}
	l := NewAPILogListener(s, sink, cfg, svcLog(t))
	wg.Add(1)
	go func() { defer wg.Done(); l.Run(ctx) }()
	<-l.Ready()
	if pub != nil {
		wg.Add(1)
		go func() { defer wg.Done(); pub.Run(ctx) }()
	}
	return sink
}

// TestAPILogDroppedTold: the entries the publisher drops (its queue full,
// an entry too large for a message) are told to the listener's sink, per
// job, exactly as many as were dropped, with the entries that went
// through; a drop while nothing else is queued is told alone.
func TestAPILogDroppedTold(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := APILogConfig{QueueEntries: 25, MessageBytes: 4000}
		pub := NewAPILogPublisher(s, cfg, svcLog(t))
		for i := 0; i < 10; i++ { // 30 entries: the last two updates (6) do not fit
			pub.StreamLog(apiJob("told1"), apiEntries(1+3*i, 3, stdoutDoc))
		}
		pub.mu.Lock()
		pub.cfg.QueueEntries = 100
		pub.mu.Unlock()
		big := fmt.Sprintf(`{"type":"stdout","message":%q}`, strings.Repeat("x", 4000))
		pub.StreamLog(apiJob("told2"), []record.LogEntry{record.NewLogEntry(big, 1), record.NewLogEntry(stdoutDoc(2), 2)})
		sink := startDropRelay(t, s, pub, cfg)
		testproc.Eventually(t, "the entries that fit to arrive", func() bool { return sink.count("told1") == 24 && sink.count("told2") == 1 })
		testproc.Eventually(t, "the drops to be told", func() bool { return sink.told("told1") == 6 && sink.told("told2") == 1 })

		// A drop while nothing is queued: an update larger than the whole
		// queue. It is told alone, in a message without entries.
		pub.StreamLog(apiJob("told3"), apiEntries(1, 101, stdoutDoc))
		testproc.Eventually(t, "a drop alone to be told", func() bool { return sink.told("told3") == 101 })
		if n := sink.count("told3"); n != 0 {
			t.Errorf("%d entries of told3 arrived, all were dropped", n)
		}
		if got := sink.told("told1") + sink.told("told2"); got != 7 {
			t.Errorf("told1 and told2 told %d dropped, want 7 (told once)", got)
		}
	})
}

// failingStore fails the next fail publishes.
type failingStore struct {
	Store
	fail atomic.Int32
}

func (f *failingStore) PublishAPILog(ctx context.Context, msg string) (int64, error) {
	if f.fail.Add(-1) >= 0 {
		return 0, errors.New("planted publish failure")
	}
	return f.Store.PublishAPILog(ctx, msg)
}

// TestAPILogDroppedKeptOnFailure: a message that carried a count and
// could not be published gives it back, with its own entries, to the
// next message: the sink is told every entry that did not arrive, though
// nothing else is handed to the publisher.
func TestAPILogDroppedKeptOnFailure(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := APILogConfig{QueueEntries: 20}
		fs := &failingStore{Store: s}
		fs.fail.Store(1)
		pub := NewAPILogPublisher(fs, cfg, svcLog(t))
		pub.StreamLog(apiJob("kept"), apiEntries(1, 20, stdoutDoc))
		pub.StreamLog(apiJob("kept"), apiEntries(21, 10, stdoutDoc)) // queue_full
		before := readCounts(t, "dropped:publish_failed")
		sink := startDropRelay(t, s, pub, cfg)
		// The first message (20 entries, "dropped":{"kept":10}) fails; the
		// retry tells all 30.
		testproc.Eventually(t, "the count to be told after the failure", func() bool { return sink.told("kept") == 30 })
		if d := before.delta(t, "dropped:publish_failed"); d != 20 {
			t.Errorf("publish_failed counted %v, want 20", d)
		}
		if n := sink.count("kept"); n != 0 {
			t.Errorf("%d entries arrived, none was published", n)
		}
		// Then the relay goes on as before.
		pub.StreamLog(apiJob("kept"), apiEntries(31, 2, stdoutDoc))
		testproc.Eventually(t, "the next entries", func() bool { return sink.count("kept") == 2 })
		if got := sink.told("kept"); got != 30 {
			t.Errorf("told %d dropped, want 30", got)
		}
	})
}

// TestAPILogListenerRefusesDropped: a message's "dropped" member is
// untrusted like the rest: one that is not an object of whole counts
// from 1 to maxDroppedCount of at most MessageEntries idents is refused
// and counted (bad_message), and the message's entries still go through.
func TestAPILogListenerRefusesDropped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := APILogConfig{MessageEntries: 3}
		sink := startDropRelay(t, s, nil, cfg)
		before := readCounts(t, "dropped:bad_message")
		bad := []string{
			`{"rd":-1}`, `{"rd":0}`, `{"rd":1.5}`, `{"rd":1e30}`, `{"rd":99999999999999999999}`,
			fmt.Sprintf(`{"rd":%d}`, int64(maxDroppedCount)+1), `{"rd":"x"}`, `{"rd":null}`, `[1]`, `7`, `"rd"`,
			`{"":1}`, `{"` + strings.Repeat("r", maxIdentBytes+1) + `":1}`, `{"a":1,"b":1,"c":1,"d":1}`,
		}
		for i, d := range append(bad, `{"rd":7,"rd2":2}`) {
			msg := fmt.Sprintf(`{"jobs":{"rd":{"url":"x"}},"entries":[{"ident":"rd","score":%d,"doc":"{}"}],"dropped":%s}`, i+1, d)
			if err := b.Client.Publish(ctx, store.ChannelAPILog, msg).Err(); err != nil {
				t.Fatal(err)
			}
		}
		testproc.Eventually(t, "every entry", func() bool { return sink.count("rd") == len(bad)+1 })
		if got := sink.told("rd"); got != 7 || sink.told("rd2") != 2 {
			t.Errorf("told rd %d, rd2 %d; want 7, 2 (the good count alone)", got, sink.told("rd2"))
		}
		if d := before.delta(t, "dropped:bad_message"); d != float64(len(bad)) {
			t.Errorf("bad_message counted %v, want %d", d, len(bad))
		}
	})
}
