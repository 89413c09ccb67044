package pipelinesim_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/bridge"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// TestUpstreamModeThroughBridge: `simulate-pipeline
// -upstream` with REDIS_URL pointing at `archivebot bridge` works a job
// from the take to mark_done, and the bridge refuses none of what it
// sends. (Without -upstream the simulator EVALs its own scripts, which the
// bridge refuses: the run fails at the first report.)
func TestUpstreamModeThroughBridge(t *testing.T) {
	b := redistest.RealOrMini(t)
	ctx := context.Background()
	st := store.New(b.Client)
	hs := apitest.Serve(t, pipelineapi.Options{Store: st})
	cl := apitest.Client(t, st, hs.URL, "sim-bridge")
	br := bridge.New(bridge.Config{Node: cl, RetryFor: 5 * time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go br.Serve(ln)
	t.Cleanup(func() { br.Close() })
	for _, id := range []string{"simup1", "simup2"} {
		if err := st.Register(ctx, store.NewJob{Ident: id, URL: "http://example.com/" + id + "/", FetchDepth: "inf",
			Slug: "x", StartedBy: "vera", StartedIn: "#ab", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: "pending"}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	o := pipelinesim.Options{RedisURL: "redis://" + ln.Addr().String() + "/0", Nickname: "sim-bridge", Version: "20250101.01",
		Codes: "200,404", Upstream: true,
		RunOptions: pipelinesim.RunOptions{Entries: 30, EntryInterval: time.Millisecond, HeartbeatInterval: 20 * time.Millisecond,
			PollInterval: 50 * time.Millisecond, ReportInterval: 50 * time.Millisecond, MaxJobs: 2}}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := pipelinesim.Run(rctx, o, &out); err != nil {
		t.Fatalf("simulate-pipeline -upstream through the bridge: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "rror") {
		t.Errorf("the run reported errors:\n%s", out.String())
	}
	rdb := b.Client
	if n, _ := rdb.Get(ctx, "jobs_completed").Int(); n != 2 {
		t.Errorf("jobs_completed = %d, want 2\n%s", n, out.String())
	}
	if n, _ := rdb.LLen(ctx, "working").Result(); n != 0 {
		t.Errorf("working = %d", n)
	}
	if m, _ := rdb.SMembers(ctx, "pipelines").Result(); len(m) != 0 {
		t.Errorf("pipelines after exit = %v", m)
	}
	for k, v := range br.Stats() {
		if strings.HasPrefix(k, "refused:") || strings.HasPrefix(k, "node_error:") || k == "noscript" {
			t.Errorf("the bridge counted %s = %d", k, v)
		}
	}
	if st := br.Stats(); st["log_entries"] != 2*(30+2) { // the entries, and the received and finished lines
		t.Errorf("log entries through the bridge = %d, want %d", st["log_entries"], 2*(30+2))
	}
}
