package pipelinesim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/archiveteam/archivebot-go/store"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// TestAPIModeCrawlsWhileShipping: an API-mode job goes on generating
// entries while a batch of its log is on its way to the node, as
// upstream's pipeline crawls while its ship_logs thread sends
// (pipelineapi/bridge/testdata/upstream_pipeline.py). The node stand-in
// holds the job's first log update until the test has seen 5 more
// entries generated; before, the job generated nothing while an update
// was in flight, so its offered entry rate fell with the node's latency
// (and the test waited in vain). The stand-in also answers the second
// log update 503 after 100 ms (nothing applied, its entries kept for
// the next batch, in front of those generated meanwhile), and
// the log and counters the node applied are checked: every entry once,
// in order, counters summed exactly.
func TestAPIModeCrawlsWhileShipping(t *testing.T) {
	n := newProxiedNode(t)
	b, st := n.b, n.st
	ctx := context.Background()
	const ident = "simship0"
	var mu sync.Mutex
	logUpdates := 0   // updates of the job carrying log entries
	logsAtBlock := -1 // EventLogs seen when the first one arrived
	logsSeen := 0
	blocked := make(chan struct{})
	release := make(chan struct{})
	seen := make(chan struct{}) // 5 entries generated while blocked
	var applied []wire.UpdateRequest
	front := n.front(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/"+ident+"/update") {
			n.pass(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req wire.UpdateRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("update body: %v", err)
		}
		mu.Lock()
		nth := 0
		if len(req.Log) > 0 {
			logUpdates++
			nth = logUpdates
		}
		if nth == 1 {
			logsAtBlock = logsSeen
		}
		mu.Unlock()
		switch nth {
		case 1:
			close(blocked)
			<-release
		case 2:
			// Answered late, so that entries come meanwhile: the
			// refused batch must go before them.
			time.Sleep(100 * time.Millisecond)
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"not_leader","reason":"this node stands by"}`)
			return
		}
		rec := n.run(r)
		if rec.Code == http.StatusOK {
			mu.Lock()
			applied = append(applied, req)
			mu.Unlock()
		}
		answer(w, rec)
	})
	c := apitest.Client(t, st, front, "sim-ship")
	if err := st.Register(ctx, store.NewJob{Ident: ident, URL: "http://example.com/s/", FetchDepth: "inf",
		Slug: "x", StartedBy: "vera", StartedIn: "#ab", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: "pending"}); err != nil {
		t.Fatal(err)
	}
	const entries = 60
	codes := []int{200, 200, 200, 301, 404, 500}
	var once sync.Once
	o := pipelinesim.RunOptions{Entries: entries, EntryInterval: 20 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, ReportInterval: 100 * time.Millisecond, MaxJobs: 1, Codes: codes,
		OnEvent: func(e pipelinesim.Event) {
			if e.Kind != pipelinesim.EventLog || e.Ident != ident {
				return
			}
			mu.Lock()
			logsSeen++
			more := logsAtBlock >= 0 && logsSeen-logsAtBlock >= 5
			mu.Unlock()
			if more {
				once.Do(func() { close(seen) })
			}
		}}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	runErr := make(chan error, 1)
	sim := pipelinesim.NewAPI(c, pipelinesim.Config{Nickname: "sim-ship"})
	go func() { runErr <- sim.Run(rctx, o, 1) }()
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("no log update reached the node in 10 s")
	}
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		mu.Lock()
		t.Errorf("the job generated %d entries in 10 s while its first log update was in flight, want 5", logsSeen-logsAtBlock)
		mu.Unlock()
	}
	close(release)
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if logUpdates < 3 {
		t.Errorf("%d log updates, want at least 3 (one held, one refused 503, the rest)", logUpdates)
	}
	// What the node applied: the received line, entries 1..N in order,
	// the finished line; counters summed once each.
	var urls []string
	sum := map[string]int64{}
	for _, u := range applied {
		for _, l := range u.Log {
			var e struct {
				Type    string `json:"type"`
				URL     string `json:"url"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(l, &e); err != nil {
				t.Fatalf("entry %s: %v", l, err)
			}
			if e.Type == "download" {
				urls = append(urls, e.URL)
			} else {
				urls = append(urls, e.Type+": "+e.Message)
			}
		}
		for k, v := range u.Incr {
			sum[k] += v
		}
	}
	want := []string{"stdout: " + fmt.Sprintf(pipelinesim.StdoutReceived, ident)}
	for i := 1; i <= entries; i++ {
		want = append(want, fmt.Sprintf("http://example.com/s/page/%d", i))
	}
	want = append(want, "stdout: "+fmt.Sprintf(pipelinesim.StdoutFinished, ident))
	if strings.Join(urls, "\n") != strings.Join(want, "\n") {
		t.Errorf("applied log:\n%s\nwant:\n%s", strings.Join(urls, "\n"), strings.Join(want, "\n"))
	}
	wantSum := map[string]int64{"bytes_downloaded": 1000 * entries, "items_downloaded": entries, "items_queued": 2 * entries}
	if fmt.Sprint(sum) != fmt.Sprint(wantSum) {
		t.Errorf("applied counters %v, want %v", sum, wantSum)
	}
	if n, _ := b.Client.Get(ctx, "jobs_completed").Int(); n != 1 {
		t.Errorf("jobs_completed = %d, want 1", n)
	}
}
