package pipelinesim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/archiveteam/archivebot-go/store"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// TestAPIModeLostTakeAnswers: the answers of the first takes that took a
// job are lost (a proxy's 502 after the node took it), more of them than
// the client's own retries of one Take; the simulator's next take sends
// the same take_id and gets the job, so no job is left held by nobody
// and every job is crawled to its end.
func TestAPIModeLostTakeAnswers(t *testing.T) {
	n := newProxiedNode(t)
	b, st := n.b, n.st
	ctx := context.Background()
	var mu sync.Mutex
	lost := 0
	front := n.front(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.PathTake {
			n.pass(w, r)
			return
		}
		rec := n.run(r)
		var out wire.TakeResponse
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		mu.Lock()
		lose := rec.Code == http.StatusOK && out.Job != nil && lost < 5
		if lose {
			lost++
		}
		mu.Unlock()
		if lose {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		answer(w, rec)
	})
	c := apitest.Client(t, st, front, "sim-lost")
	for i := range 2 {
		if err := st.Register(ctx, store.NewJob{Ident: fmt.Sprintf("simlost%d", i), URL: fmt.Sprintf("http://example.com/l%d/", i),
			FetchDepth: "inf", Slug: "x", StartedBy: "vera", StartedIn: "#ab", DelayMin: 250, DelayMax: 375, Concurrency: 3,
			Queue: "pending"}); err != nil {
			t.Fatal(err)
		}
	}
	p := pipelinesim.NewAPI(c, pipelinesim.Config{Nickname: "sim-lost"})
	errs := 0
	o := pipelinesim.RunOptions{Entries: 10, EntryInterval: 10 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, ReportInterval: 100 * time.Millisecond, MaxJobs: 2,
		OnEvent: func(e pipelinesim.Event) {
			if e.Kind == pipelinesim.EventError {
				mu.Lock()
				errs++
				mu.Unlock()
			}
		}}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.Run(rctx, o, 1); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if lost != 5 || errs == 0 {
		t.Fatalf("%d take answers lost, %d take errors seen by the simulator; want 5 and at least one (the client gave up once)", lost, errs)
	}
	if n, _ := b.Client.Get(ctx, "jobs_completed").Int(); n != 2 {
		t.Errorf("jobs_completed = %d, want 2", n)
	}
	if w, _ := b.Client.LRange(ctx, store.KeyWorking, 0, -1).Result(); len(w) != 0 {
		t.Errorf("working = %v after the run: a job left held by nobody", w)
	}
	if ids, _ := b.Client.HLen(ctx, store.KeyPipelineKeyTakeIDs("sim-lost")).Result(); ids != 2 {
		t.Errorf("the node remembers %d take_ids, want 2 (one per job: every retry sent its take's take_id)", ids)
	}
}
