package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/coordinator/store/storetest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// The whole node (console front end, external Redis) with
// notifier.finish_interval = "1h": only the push path (the pipeline's
// PUBLISH updates after mark-done) can deliver the finish report. The
// latency from mark-done to the printed line is logged, not asserted.
// The same node delivers the line an operator's `archivebot fail` queues.
func TestFinishReportWithinAnHourInterval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := filepath.Join(t.TempDir(), "push.toml")
		os.WriteFile(cfg, []byte(fmt.Sprintf(`[redis]
url = %q
[notifier]
finish_interval = "1h"
pipeline_interval = "1h"
[http]
listen = ""
`, b.URL)), 0o644)
		t.Setenv("REDIS_URL", "")
		nodeMu.Lock()
		defer nodeMu.Unlock()
		stdinR, stdinW := io.Pipe()
		out, logs := newLineLog(), newLineLog()
		done := make(chan int, 1)
		go func() { done <- run([]string{"-config", cfg}, stdinR, out, logs) }()
		defer func() {
			stdinW.Close()
			if code := <-done; code != 0 {
				t.Errorf("node exit %d; log:\n%s", code, logs.tail(50))
			}
		}()
		// Wait until the node listens on `updates`.
		testproc.Eventually(t, "the node subscribes to updates", func() bool {
			n, err := b.Client.PubSubNumSub(ctx, "updates").Result()
			return err == nil && n["updates"] > 0
		})

		pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "pushpipe"})
		for i := range 3 {
			url := fmt.Sprintf("http://push%d.example.net/", i)
			id := queueJob(t, s, url, "alice", store.KeyPending)
			job, err := pipe.Take(ctx)
			if err != nil || job == nil {
				t.Fatalf("take: %v %v", job, err)
			}
			from := out.len()
			doneAt := time.Now()
			if err := job.Done(ctx); err != nil {
				t.Fatal(err)
			}
			out.waitFor(t, from, fmt.Sprintf("alice: Your job for %s has finished. (%s)", url, id))
			t.Logf("%s: finish report printed %v after mark-done", b.Name, time.Since(doneAt).Round(time.Millisecond))
		}

		id := queueJob(t, s, "http://opfail.example.net/", "bob", store.KeyPending)
		from := out.len()
		if code, _, errs := admin(t, b, "fail", id); code != 0 {
			t.Fatalf("fail: %s", errs)
		}
		line, _ := out.waitFor(t, from, "was failed by")
		if !strings.Contains(line, id) || !strings.Contains(line, "#archivebot") {
			t.Fatalf("notice line %q", line)
		}
	})
}
