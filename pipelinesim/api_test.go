package pipelinesim_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// TestAPIMode: the simulator with a key and no Redis works jobs through
// the node's API, two at once; an !abort ends a running one aborted; the
// jobs end with upstream's effects and no log in Redis.
func TestAPIMode(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	st := store.New(b.Client)
	hs := apitest.Serve(t, pipelineapi.Options{Store: st, KeyRefresh: 20 * time.Millisecond})
	c := apitest.Client(t, st, hs.URL, "sim-api")
	var ids []string
	for i := range 4 {
		id := fmt.Sprintf("simapi%d", i)
		ids = append(ids, id)
		if err := st.Register(ctx, store.NewJob{Ident: id, URL: fmt.Sprintf("http://example.com/%d/", i), FetchDepth: "inf",
			Slug: "x", StartedBy: "vera", StartedIn: "#ab", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: "pending"}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	events := map[string][]string{}
	p := pipelinesim.NewAPI(c, pipelinesim.Config{Nickname: "sim-api"})
	aborted := make(chan struct{})
	var once sync.Once
	o := pipelinesim.RunOptions{Entries: 40, EntryInterval: 20 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, ReportInterval: 100 * time.Millisecond, MaxJobs: 4,
		OnEvent: func(e pipelinesim.Event) {
			mu.Lock()
			events[e.Ident] = append(events[e.Ident], e.Kind)
			mu.Unlock()
			if e.Kind == pipelinesim.EventLog && e.Ident == ids[0] && e.N == 5 {
				once.Do(func() {
					go func() {
						st.Abort(ctx, ids[0])
						close(aborted)
					}()
				})
			}
		}}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Run(rctx, o, 2); err != nil {
		t.Fatal(err)
	}
	<-aborted
	rdb := b.Client
	if n, _ := rdb.Get(ctx, "jobs_completed").Int(); n != 3 {
		t.Errorf("jobs_completed = %d, want 3", n)
	}
	if n, _ := rdb.Get(ctx, "jobs_aborted").Int(); n != 1 {
		t.Errorf("jobs_aborted = %d, want 1 (%v)", n, events[ids[0]])
	}
	for _, id := range ids {
		if n, _ := rdb.Exists(ctx, id+"_log").Result(); n != 0 {
			t.Errorf("%s has a log in Redis", id)
		}
	}
	if n, _ := rdb.LLen(ctx, "working").Result(); n != 0 {
		t.Errorf("working = %d", n)
	}
	if m, _ := rdb.SMembers(ctx, "pipelines").Result(); len(m) != 0 {
		t.Errorf("pipelines after exit = %v", m)
	}
}

// TestAPIModeRidesOutRefusals: an API-mode worker retries writes the
// node asks to retry (503 not_leader with Retry-After, as a standby
// answers during a leader change) and drops a job whose writes are
// refused (not_held: the job was requeued, or taken by another
// pipeline), going on with the next job. Before, either error ended the worker, and with its last
// worker the whole pipeline: the soak saw every API pipeline exit at
// each leader change.
func TestAPIModeRidesOutRefusals(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	st := store.New(b.Client)
	hs := apitest.Serve(t, pipelineapi.Options{Store: st, KeyRefresh: 20 * time.Millisecond})
	// In front of the node: the first two updates of job 0 are answered
	// as a standby answers them; job 1's updates are refused not_held.
	var mu sync.Mutex
	refused := 0
	target, _ := url.Parse(hs.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Heartbeats are updates too; only those carrying log entries
		// are refused, so that the refusal hits the crawl's writes.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		mu.Lock()
		standby := strings.Contains(r.URL.Path, "/simrefuse0/update") && bytes.Contains(body, []byte(`"log"`)) && refused < 2
		if standby {
			refused++
		}
		mu.Unlock()
		if strings.Contains(r.URL.Path, "/simrefuse1/update") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":"not_held","reason":"not held by this key"}`)
			return
		}
		if standby {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"not_leader","reason":"this node stands by"}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	c := apitest.Client(t, st, front.URL, "sim-refuse")
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("simrefuse%d", i)
		ids = append(ids, id)
		if err := st.Register(ctx, store.NewJob{Ident: id, URL: fmt.Sprintf("http://example.com/r%d/", i), FetchDepth: "inf",
			Slug: "x", StartedBy: "vera", StartedIn: "#ab", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: "pending"}); err != nil {
			t.Fatal(err)
		}
	}
	events := map[string][]string{}
	p := pipelinesim.NewAPI(c, pipelinesim.Config{Nickname: "sim-refuse"})
	o := pipelinesim.RunOptions{Entries: 30, EntryInterval: 20 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, ReportInterval: 100 * time.Millisecond, MaxJobs: 3,
		OnEvent: func(e pipelinesim.Event) {
			mu.Lock()
			events[e.Ident] = append(events[e.Ident], e.Kind)
			mu.Unlock()
		}}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.Run(rctx, o, 1); err != nil {
		t.Fatalf("Run: %v (events %v)", err, events)
	}
	mu.Lock()
	defer mu.Unlock()
	if refused != 2 {
		t.Errorf("%d updates refused as by a standby, want 2", refused)
	}
	if n, _ := b.Client.Get(ctx, "jobs_completed").Int(); n != 2 {
		t.Errorf("jobs_completed = %d, want 2 (jobs 0 and 2; events %v)", n, events)
	}
	if !slices.Contains(events[ids[1]], pipelinesim.EventDrop) {
		t.Errorf("job 1, its updates refused: events %v, want a drop", events[ids[1]])
	}
	if !slices.Contains(events[ids[2]], pipelinesim.EventDone) {
		t.Errorf("job 2 after the drop: events %v, want done", events[ids[2]])
	}
}
