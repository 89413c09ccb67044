package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	opt.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
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
	// Let any batched write happen first: nothing may come of the refusal.
	time.Sleep(3 * h.srv.opt.FlushInterval)
	if after := h.dump(); !reflect.DeepEqual(before, after) {
		h.t.Errorf("%s wrote to Redis:\nbefore %v\nafter  %v", what, before, after)
	}
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

func TestTakeUpdateDone(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.addKey("alpha")
		h.queue("job1", store.KeyPending)
		j, err := c.Take(ctx, wire.TakeRequest{})
		if err != nil || j == nil {
			t.Fatalf("take: %v %v", j, err)
		}
		pid := store.APIPipelineKey("alpha")
		if j.Ident != "job1" || j.Queue != "pending" || j.PipelineID != pid || j.Fields["pipeline_id"] != pid ||
			j.Fields["started_at"] == "" || j.Fields["url"] != "http://example.com/job1" {
			t.Fatalf("take answered %+v", j)
		}
		if !reflect.DeepEqual(j.Ignores, []string{"ignored\\.example"}) {
			t.Errorf("ignores %v", j.Ignores)
		}
		rdb := b.Client
		if w := rdb.LRange(ctx, "working", 0, -1).Val(); !reflect.DeepEqual(w, []string{"job1"}) {
			t.Errorf("working = %v", w)
		}
		if rdb.LLen(ctx, "pending").Val() != 0 {
			t.Error("job still pending")
		}
		if !rdb.SIsMember(ctx, store.KeyPipelineKeyJobs("alpha"), "job1").Val() {
			t.Error("job not in alpha's held set")
		}
		logs := []json.RawMessage{
			json.RawMessage(`{"type":"download","url":"http://example.com/a","response_code":200,"is_error":false}`),
			json.RawMessage(`{"type":"download","url":"http://example.com/b","response_code":404,"is_error":false}`),
			json.RawMessage(`{"type":"download","url":"http://example.com/c","response_code":500,"is_error":true}`),
		}
		res, err := c.Update(ctx, "job1", wire.UpdateRequest{Heartbeat: 1, Incr: map[string]int64{"bytes_downloaded": 100},
			Set: map[string]string{"warc_size": "42", "started_at": "junk"}, Log: logs})
		if err != nil {
			t.Fatal(err)
		}
		if res.LogAccepted != 3 || res.LogScore != 3 {
			t.Errorf("update answered %+v", res)
		}
		if _, err := c.Heartbeat(ctx, "job1"); err != nil {
			t.Fatal(err)
		}
		got := h.sink.got("job1")
		if len(got) != 3 || got[0].Score != 1 || got[2].Score != 3 || got[1].Doc != string(logs[1]) {
			t.Errorf("stream got %v", got)
		}
		if r := h.srv.Recent("job1", 10); len(r) != 3 {
			t.Errorf("recent = %v", r)
		}
		testproc.Eventually(h.t, "the batched write", func() bool { return rdb.HGet(ctx, "job1", "heartbeat").Val() == "2" })
		f := rdb.HGetAll(ctx, "job1").Val()
		for k, v := range map[string]string{"bytes_downloaded": "100", "warc_size": "42", "log_score": "3",
			"r2xx": "1", "r4xx": "1", "r5xx": "1", "error_count": "1", "pipeline_id": pid} {
			if f[k] != v {
				t.Errorf("job1 %s = %q, want %q", k, f[k], v)
			}
		}
		if f["started_at"] == "junk" {
			t.Error("started_at was overwritten")
		}
		if n := rdb.Exists(ctx, "job1_log").Val(); n != 0 {
			t.Error("log entries went into Redis")
		}
		// GET sees the record.
		rj, err := c.Job(ctx, "job1")
		if err != nil || rj.Fields["url"] != "http://example.com/job1" || rj.Fields["heartbeat"] != "2" {
			t.Fatalf("job: %+v %v", rj, err)
		}
		dr, err := c.Done(ctx, "job1")
		if err != nil || dr.Aborted {
			t.Fatalf("done: %+v %v", dr, err)
		}
		f = rdb.HGetAll(ctx, "job1").Val()
		if f["finished_at"] == "" {
			t.Error("no finished_at")
		}
		if rdb.LLen(ctx, "working").Val() != 0 || rdb.Get(ctx, "jobs_completed").Val() != "1" {
			t.Error("working or jobs_completed not as MARK_DONE leaves them")
		}
		if ttl := rdb.TTL(ctx, "job1").Val(); ttl < 47*time.Hour {
			t.Errorf("job1 TTL %v, want 48 h", ttl)
		}
		notes := rdb.LRange(ctx, "finish_notifications", 0, -1).Val()
		if len(notes) != 1 {
			t.Fatalf("finish notices %v", notes)
		}
		// The fields the finish notifier reads (doc/protocol.md, Finish
		// notices); the notifier's own parser is tested in coordinator.
		var n struct {
			URL       string `json:"url"`
			StartedBy string `json:"started_by"`
			StartedIn string `json:"started_in"`
			Aborted   bool   `json:"aborted"`
		}
		err = json.Unmarshal([]byte(notes[0]), &n)
		if err != nil || n.URL != "http://example.com/job1" || n.StartedBy != "nick" || n.StartedIn != "#chan" || n.Aborted {
			t.Errorf("finish notice %s: %+v %v", notes[0], n, err)
		}
		if rdb.SIsMember(ctx, store.KeyPipelineKeyJobs("alpha"), "job1").Val() {
			t.Error("job still held after done")
		}
		// Done twice: not held any more, nothing written.
		before := h.dump()
		_, err = c.Done(ctx, "job1")
		wantCode(t, err, 403, "not_held")
		h.sameDump(before, "a second done")
	})
}

func TestAbortThenDone(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.addKey("alpha")
		h.queue("job2", store.KeyPendingAO)
		j, err := c.Take(ctx, wire.TakeRequest{AOOnly: true})
		if err != nil || j == nil || j.Queue != "pending-ao" {
			t.Fatalf("take: %+v %v", j, err)
		}
		if _, err := c.Abort(ctx, "job2"); err != nil {
			t.Fatal(err)
		}
		if b.Client.HGet(ctx, "job2", "aborted").Val() != "true" {
			t.Fatal("aborted not set")
		}
		dr, err := c.Done(ctx, "job2")
		if err != nil || !dr.Aborted {
			t.Fatalf("done: %+v %v", dr, err)
		}
		if b.Client.Get(ctx, "jobs_aborted").Val() != "1" || b.Client.Exists(ctx, "jobs_completed").Val() != 0 {
			t.Error("counters not as MARK_DONE of an aborted job")
		}
		if ttl := b.Client.TTL(ctx, "job2").Val(); ttl > 5*time.Second || ttl <= 0 {
			t.Errorf("aborted job TTL %v, want 5 s", ttl)
		}
	})
}

func TestTakeQueueChoice(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.addKey("big-alpha")
		h.queue("plain", store.KeyPending)
		h.queue("named", store.KeyPendingNamed("alpha"))
		h.queue("other", store.KeyPendingNamed("beta"))
		h.queue("ao", store.KeyPendingAO)
		var order []string
		for range 3 {
			j, err := c.Take(ctx, wire.TakeRequest{})
			if err != nil || j == nil {
				t.Fatalf("take: %v %v", j, err)
			}
			order = append(order, j.Ident)
		}
		if !reflect.DeepEqual(order, []string{"named", "plain", "ao"}) {
			t.Errorf("took %v, want named, plain, ao", order)
		}
		j, err := c.Take(ctx, wire.TakeRequest{})
		if err != nil || j != nil {
			t.Fatalf("a key whose name lacks beta took %v %v", j, err)
		}
		// An explicit queue the key may not use is refused, nothing written.
		before := h.dump()
		_, err = c.Take(ctx, wire.TakeRequest{Queues: []string{"pending:beta"}})
		wantCode(t, err, 403, "forbidden_queue")
		h.sameDump(before, "a forbidden take")
		// Long poll: a job queued while waiting is taken.
		go func() { time.Sleep(300 * time.Millisecond); h.queue("late", store.KeyPending) }()
		start := time.Now()
		j, err = c.Take(ctx, wire.TakeRequest{WaitMS: 10000})
		if err != nil || j == nil || j.Ident != "late" {
			t.Fatalf("long poll: %v %v", j, err)
		}
		t.Logf("long poll answered %v after the wait began (job queued at 300 ms)", time.Since(start))
	})
}

// Another pipeline's job is refused for every operation, and nothing is
// written.
func TestOtherPipelinesJobRefused(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		alpha, beta := h.addKey("alpha"), h.addKey("beta")
		h.queue("ajob", store.KeyPendingNamed("alpha"))
		h.queue("free", store.KeyPending) // in no one's hands yet
		if j, err := alpha.Take(ctx, wire.TakeRequest{Queues: []string{"pending:alpha"}}); err != nil || j == nil {
			t.Fatalf("alpha take: %v %v", j, err)
		}
		before := h.dump()
		n0 := refusals("beta", "not_held")
		_, err := beta.Take(ctx, wire.TakeRequest{Queues: []string{"pending:alpha"}})
		wantCode(t, err, 403, "forbidden_queue")
		for _, ident := range []string{"ajob", "free", "nosuchjob"} {
			_, err = beta.Job(ctx, ident)
			wantCode(t, err, 403, "not_held")
			_, err = beta.Heartbeat(ctx, ident)
			wantCode(t, err, 403, "not_held")
			_, err = beta.Update(ctx, ident, wire.UpdateRequest{Log: []json.RawMessage{json.RawMessage(`{"type":"stdout","message":"forged"}`)}})
			wantCode(t, err, 403, "not_held")
			_, err = beta.Abort(ctx, ident)
			wantCode(t, err, 403, "not_held")
			_, err = beta.Done(ctx, ident)
			wantCode(t, err, 403, "not_held")
		}
		h.sameDump(before, "beta's refused requests")
		if len(h.sink.got("ajob")) != 0 {
			t.Error("beta's log entry reached the stream")
		}
		if got := refusals("beta", "not_held") - n0; got != 15 {
			t.Errorf("refusals counted for beta: %v, want 15", got)
		}
		testproc.Eventually(h.t, "beta's refusals in its statistics", func() bool {
			ks, _ := h.store.ListPipelineKeys(ctx)
			for _, k := range ks {
				if k.Name == "beta" {
					return k.Refusals == 16 && k.LastRefusal == "not_held"
				}
			}
			return false
		})
		// alpha still holds its job.
		if _, err := alpha.Heartbeat(ctx, "ajob"); err != nil {
			t.Fatal(err)
		}
	})
}

// A job moved away from its key behind the node's back (an operator
// fails and requeues it, another pipeline takes it) is not the key's any
// more: the batched write finds out and writes nothing.
func TestHoldLostInRedis(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		alpha := h.holding("alpha", "j")
		// Another pipeline now runs it (as after a requeue and a direct take).
		b.Client.HSet(ctx, "j", "pipeline_id", "pipeline:someoneelse")
		// Heartbeats may still be accepted into the batch (the node does
		// not know yet); none may be written, and the node finds out.
		testproc.Eventually(h.t, "the hold to be dropped", func() bool {
			_, err := alpha.Heartbeat(ctx, "j")
			return client.IsCode(err, "not_held")
		})
		if hb := b.Client.HGet(ctx, "j", "heartbeat").Val(); hb != "" {
			t.Errorf("heartbeat %q written to a job alpha no longer holds", hb)
		}
	})
}

func TestReplayedAndAlteredRefused(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "j")
		body := []byte(`{"heartbeat":1}`)
		req, err := c.NewRequest(ctx, "POST", "/v1/jobs/j/update", body)
		if err != nil {
			t.Fatal(err)
		}
		replay := req.Clone(ctx)
		replay.Body = io.NopCloser(strings.NewReader(string(body)))
		if err := c.Send(req, nil); err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(h.t, "the heartbeat", func() bool { return b.Client.HGet(ctx, "j", "heartbeat").Val() == "1" })
		before := h.dump()
		wantCode(t, c.Send(replay, nil), 401, "replayed_nonce")

		alter := func(name string, f func(*http.Request), code string) {
			t.Helper()
			r, err := c.NewRequest(ctx, "POST", "/v1/jobs/j/update", body)
			if err != nil {
				t.Fatal(err)
			}
			f(r)
			err = c.Send(r, nil)
			if e, ok := err.(*client.Error); !ok || e.Code != code {
				t.Errorf("%s: got %v, want %s", name, err, code)
			}
		}
		alter("body", func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(`{"heartbeat":9}`))
			r.ContentLength = 15
		}, "bad_signature")
		alter("query", func(r *http.Request) { r.URL.RawQuery = "x=1" }, "bad_signature")
		alter("path", func(r *http.Request) { r.URL.Path = "/v1/jobs/k/update"; r.URL.RawPath = "" }, "bad_signature")
		alter("key name", func(r *http.Request) { r.Header.Set(wire.HeaderKey, "beta") }, "unknown_key")
		alter("timestamp", func(r *http.Request) {
			ts := r.Header.Get(wire.HeaderTimestamp)
			r.Header.Set(wire.HeaderTimestamp, ts[:len(ts)-1]+string('0'+(ts[len(ts)-1]-'0'+1)%10))
		}, "bad_signature")
		alter("nonce", func(r *http.Request) { r.Header.Set(wire.HeaderNonce, strings.Repeat("ab", 16)) }, "bad_signature")
		h.sameDump(before, "replayed and altered requests")
	})
}

func TestStaleTimestampRefused(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		pub, priv, _ := ed25519.GenerateKey(nil)
		if err := h.store.AddPipelineKey(ctx, "alpha", wire.FormatPublicKey(pub)); err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(h.t, "the key", func() bool { p, _ := h.srv.currentTerm().publicKey("alpha"); return p != nil })
		h.queue("j", store.KeyPending)
		before := h.dump()
		// Timestamps are whole seconds on both sides, so a request signed
		// 61 s ahead can read as 60 s ahead when the node's second ticks
		// over in between: the skews keep a margin past MaxSkew.
		for _, skew := range []time.Duration{-wire.MaxSkew - 5*time.Second, wire.MaxSkew + 5*time.Second, -time.Hour} {
			c, _ := client.New(h.hs.URL, "alpha", priv, client.WithClock(func() time.Time { return time.Now().Add(skew) }))
			_, err := c.Take(ctx, wire.TakeRequest{})
			wantCode(t, err, 401, "stale_timestamp")
		}
		h.sameDump(before, "stale requests")
	})
}

func TestMissingAndWrongKeysRefused(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		h.addKey("alpha")
		h.queue("j", store.KeyPending)
		before := h.dump()
		// No signature at all.
		resp, err := http.Post(h.hs.URL+wire.PathTake, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		var e wire.Error
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 401 || e.Error != "missing_signature" {
			t.Errorf("unsigned: %d %+v", resp.StatusCode, e)
		}
		// A name nobody registered.
		_, priv, _ := ed25519.GenerateKey(nil)
		stranger, _ := client.New(h.hs.URL, "stranger", priv)
		_, err = stranger.Take(ctx, wire.TakeRequest{})
		wantCode(t, err, 401, "unknown_key")
		// alpha's name with another private key.
		forger, _ := client.New(h.hs.URL, "alpha", priv)
		_, err = forger.Take(ctx, wire.TakeRequest{})
		wantCode(t, err, 401, "bad_signature")
		h.sameDump(before, "unauthenticated requests")
		if refusals("-", "unknown_key") < 1 {
			t.Error("an unknown key's refusal is not counted")
		}
	})
}

// A revoked key is refused, and its open control stream closed, within
// the key refresh (250 ms by default; the test measures and logs it).
func TestRevokedKeyRefused(t *testing.T) {
	eachHarness(t, Options{KeyRefresh: DefaultKeyRefresh}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "j")
		events := make(chan client.Event, 16)
		streamErr := make(chan error, 1)
		go func() {
			streamErr <- c.Control(ctx, func(ev client.Event) error { events <- ev; return nil })
		}()
		if ev := <-events; ev.Name != wire.EventSettings {
			t.Fatalf("first event %v", ev)
		}
		before := h.dump()
		revoked := time.Now()
		if err := h.store.RevokePipelineKey(ctx, "alpha"); err != nil {
			t.Fatal(err)
		}
		var bye client.Event
		for bye.Name != wire.EventBye {
			select {
			case bye = <-events: // settings events sent before it may come first
			case <-time.After(10 * time.Second):
				t.Fatal("the control stream stayed open after the revocation")
			}
		}
		closed := time.Since(revoked)
		if err := <-streamErr; err != io.EOF {
			t.Errorf("stream ended with %v", err)
		}
		var why wire.Error
		json.Unmarshal(bye.Data, &why)
		if bye.Name != wire.EventBye || why.Error != "revoked_key" {
			t.Errorf("last event %s %s", bye.Name, bye.Data)
		}
		_, err := c.Heartbeat(ctx, "j")
		wantCode(t, err, 401, "revoked_key")
		t.Logf("control stream closed %v after the revocation", closed)
		before[store.KeyPipelineKeys] = redistest.Entry{}
		after := h.dump()
		delete(before, store.KeyPipelineKeys)
		delete(before, store.KeyPipelineKeysRevoked)
		delete(after, store.KeyPipelineKeys)
		delete(after, store.KeyPipelineKeysRevoked)
		if !reflect.DeepEqual(before, after) {
			t.Errorf("the revoked key's request wrote:\n%v\n%v", before, after)
		}
		// The stream cannot be reopened.
		err = c.Control(ctx, func(client.Event) error { return nil })
		wantCode(t, err, 401, "revoked_key")
	})
}

func TestControlSettings(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "j")
		events := make(chan client.Event, 16)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go c.Control(sctx, func(ev client.Event) error { events <- ev; return nil })
		next := func() wire.Settings {
			t.Helper()
			select {
			case ev := <-events:
				s, err := ev.Settings()
				if ev.Name != wire.EventSettings || err != nil {
					t.Fatalf("event %s %s", ev.Name, ev.Data)
				}
				return s
			case <-time.After(10 * time.Second):
				t.Fatalf("no settings event (called from %s)", callerLine())
			}
			return wire.Settings{}
		}
		if s := next(); s.Ident != "j" || s.DelayMin != "250" || s.AbortRequested {
			t.Fatalf("initial settings %+v", s)
		}
		changed := time.Now()
		if _, err := h.store.ChangeSettings(ctx, "j", store.Change{Bump: 1, Set: map[string]string{"delay_min": "999", "delay_max": "1999"}}); err != nil {
			t.Fatal(err)
		}
		s := next()
		for s.Age < 1 { // the take's own settings event may come first
			s = next()
		}
		t.Logf("settings change delivered %v after the change", time.Since(changed))
		if s.DelayMin != "999" || s.Age < 1 {
			t.Errorf("settings after !d: %+v", s)
		}
		if _, err := h.store.ChangeSettings(ctx, "j", store.Change{Bump: 1, AddPatterns: []string{"new\\.pattern"}}); err != nil {
			t.Fatal(err)
		}
		if s := next(); len(s.IgnorePatterns) != 2 {
			t.Errorf("settings after !ig: %+v", s)
		}
		if res, _, err := h.store.Abort(ctx, "j"); err != nil {
			t.Fatalf("abort: %v %v", res, err)
		}
		if s := next(); !s.AbortRequested {
			t.Errorf("settings after !abort: %+v", s)
		}
		if r, err := c.Heartbeat(ctx, "j"); err != nil || !r.AbortRequested {
			t.Errorf("update after !abort: %+v %v", r, err)
		}
	})
}

// TestFlagsReadAsTheRecord: the API reads a job's flags as every other
// reader of the record does (record.DecodeJob, doc/protocol.md Job record):
// true only when the hash says "true". Another program's "1" or "yes" in
// abort_requested or suppress_ignore_reports is not a request, in the
// settings event and in the answer to an update alike, so the pipeline is
// never told to abort a job that !status and the dashboard show running.
func TestFlagsReadAsTheRecord(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "j")
		events := make(chan client.Event, 16)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go c.Control(sctx, func(ev client.Event) error { events <- ev; return nil })
		// settingsAt is the first settings event of age at least age.
		settingsAt := func(age int64) wire.Settings {
			t.Helper()
			for {
				select {
				case ev := <-events:
					s, err := ev.Settings()
					if ev.Name != wire.EventSettings || err != nil {
						t.Fatalf("event %s %s", ev.Name, ev.Data)
					}
					if s.Age >= age {
						return s
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("no settings event of age %d", age)
				}
			}
		}
		settingsAt(0)
		for i, tc := range []struct {
			value string
			want  bool
		}{{"1", false}, {"yes", false}, {"true", true}} {
			b.Client.HSet(ctx, "j", "abort_requested", tc.value, "suppress_ignore_reports", tc.value)
			if _, err := h.store.ChangeSettings(ctx, "j", store.Change{Bump: 1}); err != nil {
				t.Fatal(err)
			}
			rec := record.DecodeJob("j", b.Client.HGetAll(ctx, "j").Val())
			if rec.AbortRequested != tc.want || rec.SuppressIgnoreReports != tc.want {
				t.Fatalf("%q: DecodeJob reads abort %v, suppress %v", tc.value, rec.AbortRequested, rec.SuppressIgnoreReports)
			}
			if s := settingsAt(int64(i + 1)); s.AbortRequested != tc.want || s.SuppressIgnoreReports != tc.want {
				t.Errorf("%q: settings event %+v, want both flags %v", tc.value, s, tc.want)
			}
			if r, err := c.Heartbeat(ctx, "j"); err != nil || r.AbortRequested != tc.want {
				t.Errorf("%q: update answer %+v %v, want abort_requested %v", tc.value, r, err, tc.want)
			}
		}
	})
}

func TestReportAndUnregister(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.addKey("alpha")
		pr, err := c.Report(ctx, map[string]string{"nickname": "pretender", "version": "20250101.01", "id": "pipeline:forged", "hostname": "h"})
		if err != nil {
			t.Fatal(err)
		}
		id := store.APIPipelineKey("alpha")
		if pr.ID != id || pr.Nickname != "alpha" {
			t.Errorf("report answered %+v", pr)
		}
		f := b.Client.HGetAll(ctx, id).Val()
		if f["nickname"] != "alpha" || f["api_key"] != "alpha" || f["reported_nickname"] != "pretender" || f["id"] != id || f["version"] != "20250101.01" || f["ts"] == "" {
			t.Errorf("record %v", f)
		}
		if !b.Client.SIsMember(ctx, "pipelines", id).Val() {
			t.Error("not in pipelines")
		}
		if b.Client.Exists(ctx, "pipeline:forged").Val() != 0 {
			t.Error("the pipeline wrote a record of its choosing")
		}
		p, err := h.store.GetPipeline(ctx, id)
		if err != nil || p == nil || p.Nickname() != "alpha" {
			t.Errorf("the store sees %v %v", p, err)
		}
		big := map[string]string{}
		for i := range wire.MaxReportFields + 1 {
			big[fmt.Sprint("f", i)] = "v"
		}
		before := h.dump()
		_, err = c.Report(ctx, big)
		wantCode(t, err, 413, "too_large")
		h.sameDump(before, "an oversized report")
		if _, err := c.Unregister(ctx); err != nil {
			t.Fatal(err)
		}
		if b.Client.Exists(ctx, id).Val() != 0 || b.Client.SIsMember(ctx, "pipelines", id).Val() {
			t.Error("unregister left the record")
		}
	})
}

func TestLimitsRefused(t *testing.T) {
	eachHarness(t, Options{Rate: 2, LogRate: 10}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "j")
		time.Sleep(1100 * time.Millisecond) // refill
		entry := json.RawMessage(`{"type":"stdout","message":"x"}`)
		many := make([]json.RawMessage, 15)
		for i := range many {
			many[i] = entry
		}
		if _, err := c.Update(ctx, "j", wire.UpdateRequest{Log: many}); err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(h.t, "the batched write", func() bool { return b.Client.HGet(ctx, "j", "log_score").Val() == "15" })
		before := h.dump()
		_, err := c.Update(ctx, "j", wire.UpdateRequest{Log: many})
		e, ok := err.(*client.Error)
		if !ok || e.Status != 429 || e.RetryAfter < time.Second {
			t.Fatalf("over the log rate: %v", err)
		}
		if n := len(h.sink.got("j")); n != 15 {
			t.Errorf("stream got %d entries, want 15 (the refused ones are not sent)", n)
		}
		// Request rate: burst 4, then refused.
		var refused *client.Error
		for range 10 {
			if _, err := c.Job(ctx, "j"); err != nil {
				refused, _ = err.(*client.Error)
				break
			}
		}
		if refused == nil || refused.Status != 429 || refused.Code != "rate_limited" || refused.RetryAfter < time.Second {
			t.Fatalf("over the request rate: %v", refused)
		}
		h.sameDump(before, "rate-limited requests")
		// Bad bodies.
		_, err = c.Update(ctx, "j", wire.UpdateRequest{Set: map[string]string{"url": "http://evil"}})
		if !client.IsCode(err, "forbidden_field") && !client.IsCode(err, "rate_limited") {
			t.Errorf("set url: %v", err)
		}
	})
}

func TestStandbyAnswers503(t *testing.T) {
	b := redistest.Mini(t)
	s := New(Options{Store: store.New(b.Client), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	_, priv, _ := ed25519.GenerateKey(nil)
	c, _ := client.New(hs.URL, "alpha", priv)
	_, err := c.Take(context.Background(), wire.TakeRequest{})
	e, ok := err.(*client.Error)
	if !ok || e.Status != 503 || e.Code != "not_leader" || e.RetryAfter != 2*time.Second {
		t.Fatalf("standby answered %v", err)
	}
	// Leading false also answers 503 in a term.
	leading := false
	s2 := New(Options{Store: store.New(b.Client), Leading: func() bool { return leading },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s2.Run(ctx)
	hs2 := httptest.NewServer(s2.Handler())
	defer hs2.Close()
	c2, _ := client.New(hs2.URL, "alpha", priv)
	time.Sleep(100 * time.Millisecond)
	_, err = c2.Take(context.Background(), wire.TakeRequest{})
	if !client.IsCode(err, "not_leader") {
		t.Fatalf("deposed leader answered %v", err)
	}
}

func callerLine() string {
	_, file, line, _ := runtime.Caller(3)
	return fmt.Sprintf("%s:%d", file, line)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// The entries kept for /logs/recent are bounded per job, in jobs and in
// bytes.
func TestRecentBounded(t *testing.T) {
	s := New(Options{})
	big := strings.Repeat("x", 60<<10)
	for i := range 2000 {
		s.addRecent(fmt.Sprint("job", i), []string{big, big, big}, 1)
	}
	if s.recentBytes > MaxRecentBytes || len(s.recent) > MaxRecentJobs {
		t.Fatalf("kept %d bytes of %d jobs", s.recentBytes, len(s.recent))
	}
	if got := s.Recent("job1999", 10); len(got) != 3 {
		t.Errorf("the newest job's entries: %d", len(got))
	}
	s.addRecent("one", []string{"a", "b"}, 1)
	for i := range 10 {
		s.addRecent("one", []string{"c"}, float64(3+i))
	}
	if got := s.Recent("one", 10); len(got) != RecentPerJob || got[9].Doc != "c" || got[9].Score != 12 || got[0].Score != 3 {
		t.Errorf("per job: %v", got)
	}
	s.forgetRecent("one")
	if got := s.Recent("one", 10); len(got) != 0 {
		t.Errorf("forgotten job: %v", got)
	}
}
