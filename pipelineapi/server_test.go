package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

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
	// One attempt: the client would otherwise wait out the Retry-After
	// it checks below, twice.
	c, _ := client.New(hs.URL, "alpha", priv, client.WithTakeRetry(client.Retry{Attempts: 1}))
	_, err := c.Take(context.Background(), wire.TakeRequest{})
	e, ok := err.(*client.Error)
	if !ok || e.Status != 503 || e.Code != "not_leader" || e.RetryAfter != 2*time.Second {
		t.Fatalf("standby answered %v", err)
	}
	// Leading false also answers 503 in a term: the term is running (it
	// answers once Leading says true), yet a deposed leader refuses.
	var leading atomic.Bool
	s2 := New(Options{Store: store.New(b.Client), Leading: leading.Load,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s2.Run(ctx) }()
	defer func() { cancel(); <-done }()
	hs2 := httptest.NewServer(s2.Handler())
	defer hs2.Close()
	c2, _ := client.New(hs2.URL, "alpha", priv, client.WithTakeRetry(client.Retry{Attempts: 1}))
	testproc.Eventually(t, "the term started", func() bool {
		s2.mu.Lock()
		defer s2.mu.Unlock()
		return s2.term != nil
	})
	_, err = c2.Take(context.Background(), wire.TakeRequest{})
	if !client.IsCode(err, "not_leader") {
		t.Fatalf("deposed leader answered %v", err)
	}
	leading.Store(true)
	_, err = c2.Take(context.Background(), wire.TakeRequest{})
	if !client.IsCode(err, "unknown_key") {
		t.Fatalf("the same term, leading: %v, want 401 unknown_key (the term answers)", err)
	}
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
