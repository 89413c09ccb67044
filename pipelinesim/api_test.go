package pipelinesim_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// TestAPIMode: the simulator with a key and no Redis works jobs through
// the node's API, two at once; an !abort ends a running one aborted; the
// jobs end with upstream's effects and no log in Redis.
func TestAPIMode(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	st := store.NewStore(b.Client)
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
