package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// t0 is the fixture's clock: 1732900000 = 2024-11-29T17:06:40Z.
var t0 = time.Unix(1732900000, 0)

func fixedNow() time.Time { return t0 }

// testSets stand for the bot's ignore set catalog in these tests.
var testSets = map[string][]string{
	"global": {`^https?://[^/]+/cgi-bin/`, `/\.git/`},
	"blogs":  {`\?replytocom=`, `/feed/?$`},
}

// fixture is the Redis state upstream would have, built the way it would
// be built: jobs registered by the store (as the bot does), taken, logged
// and marked done by the pipeline simulator, a failure recorded as the
// fail path will record it, tweets as the tweeter writes them.
type fixture struct {
	b     *redistest.Backend
	store *store.Store
	srv   *Server
	pipe  *pipelinesim.Pipeline

	// Idents by role.
	run1, run2         string // running, with logs
	pend1, pend2       string // pending (pend1 is next)
	ao, large, named   string // pending-ao, pending-large, pending:foo
	finished, aborted  string
	failed             string
	urls               map[string]string
	tweet1, tweet2     string
	tweet1At, tweet2At float64
}

func register(t testing.TB, f *fixture, url, queue, depth string, patterns ...string) string {
	t.Helper()
	id := ident.Of(url)
	err := f.store.Register(context.Background(), store.NewJob{
		Ident: id, URL: url, FetchDepth: depth, Slug: "x-" + depth, StartedBy: "alice", StartedIn: "#archivebot",
		DelayMin: 250, DelayMax: 375, Concurrency: 3, SettingsAge: 4, Patterns: patterns, Queue: queue,
	})
	if err != nil {
		t.Fatalf("register %s: %v", url, err)
	}
	f.urls[id] = url
	return id
}

func newFixture(t testing.TB, b *redistest.Backend) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{b: b, store: store.New(b.Client, store.WithClock(fixedNow)), urls: map[string]string{}}
	f.srv = New(Options{Store: f.store, Now: fixedNow, IgnoreSets: func() map[string][]string { return testSets }})
	f.pipe = pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "simpipe", Now: fixedNow})
	if err := f.pipe.Report(ctx, "Running"); err != nil {
		t.Fatal(err)
	}
	take := func(want string) *pipelinesim.Job {
		t.Helper()
		j, err := f.pipe.Take(ctx)
		if err != nil || j == nil || j.Ident != want {
			t.Fatalf("take: %v, %v (want %s)", j, err, want)
		}
		return j
	}

	// Two running jobs with log entries and counters.
	f.run1 = register(t, f, "http://run1.example.com/", store.KeyPending, "inf",
		testSets["global"][0], testSets["global"][1], `^http://run1\.example\.com/private/`)
	f.run2 = register(t, f, "http://run2.example.com/", store.KeyPending, "inf")
	j1, j2 := take(f.run1), take(f.run2)
	for i, code := range []int{200, 200, 301, 404, 500} {
		if _, err := j1.LogDownload(ctx, fmt.Sprintf("http://run1.example.com/p%d", i), code); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j1.LogIgnore(ctx, "http://run1.example.com/cgi-bin/x", testSets["global"][0], "global"); err != nil {
		t.Fatal(err)
	}
	if _, err := j1.Log(ctx, "not json at all"); err != nil { // skipped by /logs/recent
		t.Fatal(err)
	}
	if _, err := j2.LogDownload(ctx, "http://run2.example.com/", 200); err != nil {
		t.Fatal(err)
	}
	if err := j1.AddCounters(ctx, 123456, 5, 40); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{f.run1, f.run2} {
		countLog(t, f.store, id)
	}

	// A finished and an aborted job, indexed as the finish notifier does.
	f.finished = register(t, f, "http://done.example.com/", store.KeyPending, "inf")
	jd := take(f.finished)
	if _, err := jd.LogDownload(ctx, "http://done.example.com/", 200); err != nil {
		t.Fatal(err)
	}
	if err := jd.Done(ctx); err != nil {
		t.Fatal(err)
	}
	f.aborted = register(t, f, "http://aborted.example.com/", store.KeyPending, "inf")
	ja := take(f.aborted)
	if _, _, err := f.store.Abort(ctx, f.aborted); err != nil {
		t.Fatal(err)
	}
	if err := ja.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ja.Done(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{f.finished, f.aborted} {
		if err := f.store.IndexFinished(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// A failed job: the fail path expires its record in 5 s and keeps a
	// failure record.
	f.failed = register(t, f, "http://failed.example.com/", store.KeyPendingAO, "shallow")
	job, err := f.store.GetJob(ctx, f.failed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.FailJob(ctx, f.failed, "failed by bob"); err != nil {
		t.Fatal(err)
	}
	if err := f.store.RecordFailure(ctx, record.Failure{Ident: f.failed, URL: job.URL.Value, Reason: "failed by bob",
		FailedBy: "bob", FailedAt: 1732900100.5, Queue: store.KeyPendingAO, Job: job.Fields}); err != nil {
		t.Fatal(err)
	}

	// Queued jobs in every queue kind.
	f.pend1 = register(t, f, "http://pend1.example.com/", store.KeyPending, "inf")
	f.pend2 = register(t, f, "http://pend2.example.com/", store.KeyPending, "inf")
	f.ao = register(t, f, "http://ao.example.com/page", store.KeyPendingAO, "shallow")
	f.large = register(t, f, "http://large.example.com/", store.KeyPendingLarge, "inf")
	f.named = register(t, f, "http://named.example.com/", store.KeyPendingNamed("foo"), "inf")

	// Tweets as the tweeter records them.
	f.tweet1, f.tweet1At = "Archiving http://run1.example.com/", 1732900000
	f.tweet2, f.tweet2At = "Archiving http://run2.example.com/?a=1&b=<2>", 1732900001.5
	for text, at := range map[string]float64{f.tweet1: f.tweet1At, f.tweet2: f.tweet2At} {
		if err := b.Client.Do(ctx, "ZADD", store.KeyTweetsDone, at, text).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// get runs one request through the server's handler.
func get(t testing.TB, h http.Handler, path, accept string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t testing.TB, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func decode(t testing.TB, r *http.Response, v any) {
	t.Helper()
	b := body(t, r)
	if err := json.Unmarshal([]byte(b), v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
}

func expect(t testing.TB, r *http.Response, status int, ctype string) {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s: status %d, want %d (body %q)", r.Request.URL, r.StatusCode, status, body(t, r))
	}
	if got := r.Header.Get("Content-Type"); got != ctype {
		t.Fatalf("%s: Content-Type %q, want %q", r.Request.URL, got, ctype)
	}
}

// quietLogger is a logger that writes nowhere.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// idleClient is a stream client of h with queue limits lim and no
// connection: its writer never runs, as a client that stopped reading.
func idleClient(h *Hub, v2 bool, lim queueLimits) *client {
	return &client{hub: h, v2: v2, lim: lim, signal: make(chan struct{}, 1), done: make(chan struct{})}
}

// countLog counts the log of ident into its record as the analyzer does
// (package coordinator, which web's tests do not build): one batch read
// through the store, counted by record.CountEntries, committed with
// CommitLogCounts under the analyzer's default bounds.
func countLog(t testing.TB, st *store.Store, id string) record.BatchCount {
	t.Helper()
	ctx := context.Background()
	bookmark, ok, err := st.LogBookmark(ctx, id)
	if err != nil || !ok {
		t.Fatalf("bookmark of %s: %v %v", id, ok, err)
	}
	entries, err := st.ReadLog(ctx, id, bookmark, config.DefaultAnalyzerBatch)
	if err != nil {
		t.Fatal(err)
	}
	b := record.CountEntries(entries)
	next := bookmark
	if b.Entries > 0 {
		next = strconv.FormatFloat(b.Last, 'f', -1, 64)
	}
	res, _, err := st.CommitLogCounts(ctx, id, bookmark, next, b.Counts, config.DefaultAnalyzerTrimAfter, false, 0)
	if err != nil || res != store.LogCommitted {
		t.Fatalf("commit the counts of %s: %v %v", id, res, err)
	}
	return b
}
