package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// relayCount is a series of the relay's metrics (what: a label value of
// archivebot_stream_api_entries_total, or "dropped:REASON").
func relayCount(t testing.TB, what string) float64 {
	t.Helper()
	name, label, value := "archivebot_stream_api_entries_total", "what", what
	if r, ok := strings.CutPrefix(what, "dropped:"); ok {
		name, label, value = "archivebot_stream_api_dropped_total", "reason", r
	}
	return relayMetric(t, name, label, value)
}

// counts reads several series at once; delta their change since.
type counts map[string]float64

func readCounts(t testing.TB, what ...string) counts {
	c := counts{}
	for _, w := range what {
		c[w] = relayCount(t, w)
	}
	return c
}

func (c counts) delta(t testing.TB, what string) float64 { return relayCount(t, what) - c[what] }

// wantReceived checks the relay's "received" count: exactly want on
// miniredis; at least want on a shared redis-server, where pub/sub
// ignores the database index and another package's test publishing on
// the same channel at the same time is received too (.ci/run counted 26
// of 25). The sink's own count of this test's jobs stays exact.
func wantReceived(t testing.TB, b *redistest.Backend, got float64, want float64) {
	t.Helper()
	if got == want || b.Real() && got > want {
		return
	}
	t.Errorf("received counted %v, want %v", got, want)
}

func apiJob(ident string, fields ...string) *record.Job {
	m := map[string]string{"url": "http://" + ident + ".example/", "pipeline_id": "archivebot:pipelinekey:k"}
	for i := 0; i+1 < len(fields); i += 2 {
		m[fields[i]] = fields[i+1]
	}
	return record.DecodeJob(ident, m)
}

func apiEntries(from, n int, f func(i int) string) []record.LogEntry {
	out := make([]record.LogEntry, n)
	for i := range out {
		out[i] = record.NewLogEntry(f(from+i), float64(from+i))
	}
	return out
}

func stdoutDoc(i int) string { return fmt.Sprintf(`{"type":"stdout","message":"line %d\n","ts":1}`, i) }

// startRelay runs a listener feeding a recording sink, waits for its
// subscription, and runs pub (when not nil).
func startRelay(t *testing.T, s *store.Store, pub *APILogPublisher, cfg APILogConfig) *sinkRec {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	sink := newSinkRec()
	l := NewAPILogListener(s, sink, cfg, svcLog(t))
	wg.Add(1)
	go func() { defer wg.Done(); l.Run(ctx) }()
	select {
	case <-l.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not subscribe")
	}
	if pub != nil {
		wg.Add(1)
		go func() { defer wg.Done(); pub.Run(ctx) }()
	}
	return sink
}

func (s *sinkRec) scores(ident string) []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []float64
	for _, e := range s.entries[ident] {
		out = append(out, e.Score)
	}
	return out
}

func (s *sinkRec) count(ident string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries[ident])
}

func wantScores(t *testing.T, what string, got []float64, from, to int) {
	t.Helper()
	if len(got) != to-from+1 {
		t.Fatalf("%s: %d entries %v, want %d to %d", what, len(got), got, from, to)
	}
	for i, s := range got {
		if s != float64(from+i) {
			t.Fatalf("%s: entries %v, want %d to %d in order", what, got, from, to)
		}
	}
}

// TestAPILogRelay: what the API hands the publisher reaches a listener's
// sink as it was handed: every entry once, each job's in order, the same
// decoded entries, with the job's record; updates queued together go out
// in messages within the bounds.
func TestAPILogRelay(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := APILogConfig{MessageEntries: 7, MessageBytes: 2000}
		pub := NewAPILogPublisher(s, cfg, svcLog(t))
		// What is on the channel, as another subscriber hears it.
		raw := b.Client.Subscribe(ctx, store.ChannelAPILog)
		defer raw.Close()
		if _, err := raw.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		before := readCounts(t, "published", "received")
		// Queued before the publisher runs: one round batches them all.
		for i := 0; i < 10; i++ {
			pub.StreamLog(apiJob("relaya", "bytes_downloaded", fmt.Sprint(i)), apiEntries(1+3*i, 3, stdoutDoc))
			pub.StreamLog(apiJob("relayb"), apiEntries(1+2*i, 2, func(i int) string {
				return fmt.Sprintf(`{"type":"download","url":"http://b/%d","response_code":500,"is_error":true,"wget_code":"\"quoted\"\t"}`, i)
			}))
		}
		sink := startRelay(t, s, pub, cfg)
		testproc.Eventually(t, "50 entries to arrive", func() bool { return sink.count("relaya") == 30 && sink.count("relayb") == 20 })
		wantScores(t, "relaya", sink.scores("relaya"), 1, 30)
		wantScores(t, "relayb", sink.scores("relayb"), 1, 20)
		sink.mu.Lock()
		e := sink.entries["relayb"][4]
		want := record.NewLogEntry(fmt.Sprintf(`{"type":"download","url":"http://b/%d","response_code":500,"is_error":true,"wget_code":"\"quoted\"\t"}`, 5), 5)
		if e != want {
			t.Errorf("entry arrived as %+v, was %+v", e, want)
		}
		if sink.jobs["relaya"]["url"] != "http://relaya.example/" || sink.jobs["relaya"]["pipeline_id"] != "archivebot:pipelinekey:k" {
			t.Errorf("job record arrived as %v", sink.jobs["relaya"])
		}
		sink.mu.Unlock()
		if d := before.delta(t, "published"); d != 50 {
			t.Errorf("published counted %v, want 50", d)
		}
		wantReceived(t, b, before.delta(t, "received"), 50)
		// Every message within the bounds, and more than one: the bounds
		// split the round.
		msgs := 0
		for n := 0; n < 50; {
			m, err := raw.ReceiveTimeout(ctx, 5*time.Second)
			if err != nil {
				t.Fatalf("after %d entries in %d messages: %v", n, msgs, err)
			}
			msg := m.(*redis.Message).Payload
			var am apiLogMessage
			if err := json.Unmarshal([]byte(msg), &am); err != nil {
				t.Fatal(err)
			}
			if len(msg) > cfg.MessageBytes || len(am.Entries) > cfg.MessageEntries || len(am.Entries) == 0 {
				t.Errorf("message of %d bytes, %d entries; at most %d, %d", len(msg), len(am.Entries), cfg.MessageBytes, cfg.MessageEntries)
			}
			n += len(am.Entries)
			msgs++
		}
		if msgs < 50/cfg.MessageEntries {
			t.Errorf("%d messages for 50 entries, at most %d each", msgs, cfg.MessageEntries)
		}
		t.Logf("50 entries in %d messages", msgs)
	})
}

// TestAPILogRelayBounds: the publisher never blocks and drops what it
// cannot carry, counted: updates past its queue's bound, an entry too
// large for a message, messages that cannot be published in time (Redis
// that does not answer); the rest still goes through.
func TestAPILogRelayBounds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := APILogConfig{QueueEntries: 25, MessageBytes: 4000}
		pub := NewAPILogPublisher(s, cfg, svcLog(t))
		before := readCounts(t, "dropped:queue_full", "dropped:too_large", "received")
		for i := 0; i < 10; i++ { // 30 entries: the last two updates do not fit
			pub.StreamLog(apiJob("bounds"), apiEntries(1+3*i, 3, stdoutDoc))
		}
		// An entry that does not fit a message with its job's record.
		pub.mu.Lock()
		pub.cfg.QueueEntries = 100
		pub.mu.Unlock()
		big := fmt.Sprintf(`{"type":"stdout","message":%q}`, strings.Repeat("x", 4000))
		pub.StreamLog(apiJob("bounds"), []record.LogEntry{record.NewLogEntry(big, 100), record.NewLogEntry(stdoutDoc(101), 101)})
		if d := before.delta(t, "dropped:queue_full"); d != 6 {
			t.Errorf("queue_full counted %v, want 6", d)
		}
		sink := startRelay(t, s, pub, cfg)
		testproc.Eventually(t, "the entries that fit to arrive", func() bool { return sink.count("bounds") == 25 })
		got := sink.scores("bounds")
		wantScores(t, "bounds", got[:24], 1, 24)
		if got[24] != 101 {
			t.Errorf("after the entry too large: %v", got[24])
		}
		if d := before.delta(t, "dropped:too_large"); d != 1 {
			t.Errorf("too_large counted %v, want 1", d)
		}
		wantReceived(t, b, before.delta(t, "received"), 25)
	})
	t.Run("silent-redis", func(t *testing.T) {
		// The node's client waits 3 s for an answer; this one 200 ms.
		c := redis.NewClient(&redis.Options{Addr: redistest.Silent(t), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond, Protocol: 2})
		defer c.Close()
		pub := NewAPILogPublisher(store.New(c), APILogConfig{QueueEntries: 10}, svcLog(t))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); pub.Run(ctx) }()
		defer func() { cancel(); <-done }()
		before := readCounts(t, "dropped:queue_full", "dropped:publish_failed")
		// The first update goes out and waits for the silent server; the
		// API goes on: its calls return while the publish hangs, and
		// what the queue cannot hold is dropped.
		pub.StreamLog(apiJob("silent"), apiEntries(1, 4, stdoutDoc))
		testproc.Eventually(t, "the publisher to take the first update", func() bool {
			pub.mu.Lock()
			defer pub.mu.Unlock()
			return len(pub.queue) == 0
		})
		for i := 0; i < 5; i++ {
			pub.StreamLog(apiJob("silent"), apiEntries(5+4*i, 4, stdoutDoc))
		}
		if d := before.delta(t, "dropped:queue_full"); d != 12 {
			t.Errorf("queue_full counted %v, want 12 (10 queued at most)", d)
		}
		testproc.Eventually(t, "every publish to time out", func() bool { return before.delta(t, "dropped:publish_failed") == 12 })
	})
}

// TestAPILogListenerRefuses: anyone who can write to Redis can publish
// on the channel; what is not a message of the publisher's, or entries in
// it that are not ones, are refused and counted, and the rest goes
// through.
func TestAPILogListenerRefuses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := APILogConfig{MessageBytes: 8000, MessageEntries: 5}
		sink := startRelay(t, s, nil, cfg)
		before := readCounts(t, "dropped:bad_message", "received")
		job := `"jobs":{"ok":{"url":"http://ok.example/"}}`
		good := func(score int) string {
			return fmt.Sprintf(`{"ident":"ok","score":%d,"doc":%q}`, score, stdoutDoc(score))
		}
		for _, msg := range []string{
			`not json`,
			`{"jobs":{"ok":{"url":"x"}},"entries":[` + strings.Repeat(`{"ident":"ok","score":1,"doc":"{}"},`, 5) + `{"ident":"ok","score":1,"doc":"{}"}]}`, // 6 entries
			`{` + job + `,"entries":[{"ident":"ok","score":1,"doc":"` + strings.Repeat("x", 8000) + `"}]}`,                                                 // too large
			`{` + job + `,"entries":[` + strings.Join([]string{
				good(1),
				`{"ident":"nojob","score":2,"doc":"{}"}`, // no record
				`{"ident":"","score":2,"doc":"{}"}`,
				`{"ident":"ok","score":0,"doc":"{}"}`,
				`{"ident":"ok","score":-3,"doc":"{}"}`,
			}, ",") + `]}`,
			`{` + job + `,"entries":[` + good(2) + `,` + good(3) + `]}`,
		} {
			if err := b.Client.Publish(ctx, store.ChannelAPILog, msg).Err(); err != nil {
				t.Fatal(err)
			}
		}
		testproc.Eventually(t, "the good entries", func() bool { return sink.count("ok") == 3 })
		wantScores(t, "ok", sink.scores("ok"), 1, 3)
		if d := before.delta(t, "dropped:bad_message"); d != 7 {
			t.Errorf("bad_message counted %v, want 7 (3 messages, 4 entries)", d)
		}
		if d := before.delta(t, "received"); d != 3 {
			t.Errorf("received counted %v, want 3", d)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.entries) != 1 {
			t.Errorf("jobs streamed: %v", sink.entries)
		}
	})
}

// countSink counts the entries it gets, and the dropped ones it is told.
type countSink struct{ n, told atomic.Int64 }

func (c *countSink) StreamLog(_ *record.Job, es []record.LogEntry) { c.n.Add(int64(len(es))) }

func (c *countSink) StreamDropped(m map[string]int) {
	for _, n := range m {
		c.told.Add(int64(n))
	}
}

// BenchmarkAPILogRelay: updates of 10 entries of about 300 bytes handed
// to the publisher as fast as one goroutine can (ns/op: StreamLog's
// cost, the API's request path) and carried through Redis to a listener;
// entries/s is what reached the listener's sink, dropped/op what the
// queue could not hold (a flood beyond what Redis carries: counted
// drops, never a wait) and told/op what of them the listener's sink was
// told (as many, unless a publish failed and a count was told twice).
//
//	go test -run '^$' -bench BenchmarkAPILogRelay -benchtime 20000x ./coordinator/
func BenchmarkAPILogRelay(b *testing.B) {
	for _, be := range redistest.All(b) {
		b.Run(be.Name, func(b *testing.B) {
			s := store.New(be.Client)
			sink, pub := startAPILogRelay(b, s)
			doc := fmt.Sprintf(`{"type":"download","url":"http://bench.example/%s","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":1732900000}`, strings.Repeat("p", 150))
			job := apiJob("benchjob", "bytes_downloaded", "123456", "items_downloaded", "42")
			entries := apiEntries(1, 10, func(int) string { return doc })
			dropped := relayCount(b, "dropped:queue_full")
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				pub.StreamLog(job, entries)
			}
			b.StopTimer()
			lost := relayCount(b, "dropped:queue_full") - dropped
			want := int64(10*b.N) - int64(lost)
			deadline := time.Now().Add(time.Minute)
			for (sink.n.Load() < want || sink.told.Load() < int64(lost)) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			all := time.Since(start)
			b.ReportMetric(float64(sink.n.Load())/all.Seconds(), "entries/s")
			b.ReportMetric(lost/float64(b.N), "dropped/op")
			b.ReportMetric(float64(sink.told.Load())/float64(b.N), "told/op")
		})
	}
}
