package pipelinesim_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/bridge"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// In API mode, as the README's walk-through runs it, the simulator says
// it waits once for all its workers, not once per worker, and says it
// again only after a job was taken.
func TestAPIModeSaysWhenWaiting(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	st := store.New(b.Client)
	hs := apitest.Serve(t, pipelineapi.Options{Store: st, KeyRefresh: 20 * time.Millisecond})
	keyPath := filepath.Join(t.TempDir(), "alpha.key")
	k, err := bridge.InitKey(keyPath, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddPipelineKey(ctx, k.Name, k.Public()); err != nil {
		t.Fatal(err)
	}
	var out testproc.Buffer
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- pipelinesim.Run(rctx, pipelinesim.Options{Node: hs.URL, Key: keyPath, Workers: 3, RunOptions: pipelinesim.RunOptions{
			Entries: 1, EntryInterval: time.Millisecond, PollInterval: 10 * time.Millisecond,
			ReportInterval: 10 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond}}, &out)
	}()
	const waiting = "waiting: no job is queued"
	testproc.EventuallyWithin(t, 30*time.Second, "the waiting line", func() bool { return strings.Contains(out.String(), waiting) })
	if err := st.Register(ctx, store.NewJob{Ident: "idleapi1", URL: "http://example.com/idle/", FetchDepth: "inf",
		Slug: "x", StartedBy: "vera", StartedIn: "#ab", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: "pending"}); err != nil {
		t.Fatal(err)
	}
	testproc.EventuallyWithin(t, 30*time.Second, "the take", func() bool { return strings.Contains(out.String(), "take idleapi1") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	before, _, _ := strings.Cut(out.String(), "take idleapi1")
	if n := strings.Count(before, waiting); n != 1 {
		t.Errorf("%d waiting lines for 3 workers before the take, want 1:\n%s", n, out.String())
	}
}
