package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// With a finish interval of an hour only the push path (the pipeline's
// PUBLISH updates after mark-done) can deliver the report. The latency
// from mark-done to the line is logged, not asserted.
func TestFinishReportPushedByUpdates(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		st := store.NewStore(b.Client)
		ann := newSvcAnnouncer("#archivebot")
		svc := NewServices(st, ann, ServicesConfig{
			Reaper:    ReaperConfig{Interval: time.Hour, Threshold: 1000},
			Finish:    FinishConfig{Interval: time.Hour},
			Pipelines: PipelineNotifierConfig{Interval: time.Hour, SilentAfter: time.Hour},
			Analyzer:  AnalyzerConfig{SweepInterval: time.Hour, Debounce: -1, TrimAfter: 1000},
		}, svcLog(t))
		subscribed := make(chan struct{})
		var once sync.Once
		svc.Updates.OnSubscribe(func(context.Context) { once.Do(func() { close(subscribed) }) })
		svc.Start(ctx)
		t.Cleanup(svc.Stop)
		<-subscribed

		pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "pushpipe"})
		for i := range 3 {
			url := fmt.Sprintf("http://push%d.example.org/", i)
			id := svcQueue(t, st, url, "alice", "#archivebot", store.KeyPending)
			job, err := pipe.Take(ctx)
			if err != nil || job == nil {
				t.Fatalf("take: %v %v", job, err)
			}
			// Log traffic just before the end, as a crawl has: the
			// messages of the log entries start cycles too, and the
			// mark-done message must not be lost among them.
			for k := range 5 {
				if _, err := job.LogDownload(ctx, fmt.Sprintf("%sp%d", url, k), 200); err != nil {
					t.Fatal(err)
				}
			}
			done := time.Now()
			if err := job.Done(ctx); err != nil {
				t.Fatal(err)
			}
			l := ann.waitLine(t, 30*time.Second)
			want := fmt.Sprintf("alice: Your job for %s has finished. (%s)", url, id)
			if l.Text != want {
				t.Fatalf("line %q, want %q", l.Text, want)
			}
			t.Logf("%s: finish report %v after mark-done", b.Name, time.Since(done).Round(time.Millisecond))
		}
	})
}
