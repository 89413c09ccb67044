package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// The pipeline API tests' harness: a server over a store on each
// backend, keys, queued jobs, and what Redis holds.

// recSink records what the server hands the live stream.
type recSink struct {
	mu      sync.Mutex
	entries map[string][]record.LogEntry
	jobs    map[string]map[string]string
}

func (r *recSink) StreamLog(job *record.Job, es []record.LogEntry) {
	ident := job.Ident
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries, r.jobs = map[string][]record.LogEntry{}, map[string]map[string]string{}
	}
	r.entries[ident] = append(r.entries[ident], es...)
	r.jobs[ident] = job.Fields
}
func (r *recSink) StreamEvent(news.JobEvent) {}

func (r *recSink) got(ident string) []record.LogEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record.LogEntry(nil), r.entries[ident]...)
}

type harness struct {
	t     *testing.T
	b     *redistest.Backend
	store *store.Store
	srv   *Server
	hs    *httptest.Server
	sink  *recSink
	stop  context.CancelFunc
	done  chan struct{}
}

func newHarness(t *testing.T, b *redistest.Backend, opt Options) *harness {
	t.Helper()
	h := &harness{t: t, b: b, store: store.New(b.Client), sink: &recSink{}}
	opt.Store = h.store
	opt.Sink = h.sink
	if opt.KeyRefresh == 0 {
		opt.KeyRefresh = 50 * time.Millisecond
	}
	if opt.FlushInterval == 0 {
		opt.FlushInterval = 50 * time.Millisecond
	}
	opt.Logger = slog.New(slog.NewTextHandler(newTestWriter(t), nil))
	h.srv = New(opt)
	h.hs = httptest.NewServer(h.srv.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan struct{})
	go func() { defer close(h.done); h.srv.Run(ctx) }()
	t.Cleanup(func() { h.stop(); <-h.done; h.hs.Close() })
	testproc.Eventually(h.t, "the term to start", func() bool { return h.srv.currentTerm() != nil })
	return h
}

// eachHarness runs fn with a fresh harness on each backend
// (redistest.Each).
func eachHarness(t *testing.T, opt Options, fn func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context)) {
	t.Helper()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) { fn(t, b, newHarness(t, b, opt), context.Background()) })
}

// addKey registers a new key and returns a client of the test server
// signing with it, once the server knows it.
func (h *harness) addKey(name string, opts ...client.Option) *client.Client {
	h.t.Helper()
	return h.addKeyAt(h.hs.URL, name, opts...)
}

// addKeyAt is addKey with a client of the server at url (another listener
// of h.srv).
func (h *harness) addKeyAt(url, name string, opts ...client.Option) *client.Client {
	h.t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.store.AddPipelineKey(context.Background(), name, wire.FormatPublicKey(pub)); err != nil {
		h.t.Fatal(err)
	}
	testproc.Eventually(h.t, "key "+name, func() bool { p, _ := h.srv.currentTerm().publicKey(name); return p != nil })
	c, err := client.New(url, name, priv, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// queue writes a job as the bot's register does (the fields pipelines
// read) and pushes it on queue.
func (h *harness) queue(ident, queue string) {
	h.t.Helper()
	ctx := context.Background()
	err := h.store.Register(ctx, store.NewJob{Ident: ident, URL: "http://example.com/" + ident,
		FetchDepth: "inf", Slug: "example.com-inf", StartedBy: "nick", StartedIn: "#chan",
		DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: queue, Patterns: []string{"ignored\\.example"}})
	if err != nil {
		h.t.Fatalf("register %s: %v", ident, err)
	}
}

// holding registers key name, queues job ident on pending and has the new
// client take it: the start of most tests.
func (h *harness) holding(name, ident string) *client.Client {
	h.t.Helper()
	c := h.addKey(name)
	h.queue(ident, store.KeyPending)
	if j, err := c.Take(context.Background(), wire.TakeRequest{}); err != nil || j == nil {
		h.t.Fatalf("take: %v %v", j, err)
	}
	return c
}

// dump is the database without the keys every authenticated request may
// write (its nonce, the key's statistics): what "nothing written" compares.
func (h *harness) dump() map[string]redistest.Entry {
	h.t.Helper()
	d := h.b.Dump(h.t)
	for k := range d {
		if strings.HasPrefix(k, store.PipelineKeyPrefix) && !strings.HasSuffix(k, ":jobs") {
			delete(d, k)
		}
	}
	return d
}

func (h *harness) sameDump(before map[string]redistest.Entry, what string) {
	h.t.Helper()
	// Every batched write first (a flush pass, waiting for one under
	// way): nothing may come of the refusal.
	h.flushed()
	if after := h.dump(); !reflect.DeepEqual(before, after) {
		h.t.Errorf("%s wrote to Redis:\nbefore %v\nafter  %v", what, before, after)
	}
}

// flushed returns once the server has written everything its requests
// so far left pending.
func (h *harness) flushed() {
	h.t.Helper()
	t := h.srv.currentTerm()
	if t == nil {
		h.t.Fatal("no term")
	}
	t.flushNow(context.Background())
}

func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	e, ok := err.(*client.Error)
	if !ok {
		t.Fatalf("got %v, want a %d %s refusal", err, status, code)
	}
	if e.Status != status || e.Code != code {
		t.Fatalf("got %d %s (%s), want %d %s", e.Status, e.Code, e.Reason, status, code)
	}
}

func refusals(key, reason string) float64 {
	mfs, _ := metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "archivebot_pipelineapi_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["key"] == key && l["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func callerLine() string {
	_, file, line, _ := runtime.Caller(3)
	return fmt.Sprintf("%s:%d", file, line)
}

// testWriter logs through t until the test ends; lines written later
// (the refusal log's end-of-period line, on a timer) are dropped.
type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func newTestWriter(t *testing.T) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
