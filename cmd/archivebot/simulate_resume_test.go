package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// TestSimulatePipelineResume: for a rehearsal on the fixture, `archivebot
// simulate-pipeline -resume` goes on crawling the jobs the fixture's
// pipe-one holds (as the real pipeline would across the switch) beside
// the jobs it takes, and finishes them: the abort requested for one is
// honoured.
func TestSimulatePipelineResume(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		fx := loadMigrateFixture(t, b.Client)
		id := strings.TrimPrefix(fxPipeOne(t, fx), "pipeline:")
		var out, errb bytes.Buffer
		code := run([]string{"simulate-pipeline", "-redis", b.URL, "-id", id, "-nickname", "pipe-one",
			"-resume", fxRunning + "," + fxAbort, "-max-jobs", "1", "-entries", "3", "-entry-interval", "1ms",
			"-heartbeat-interval", "10ms", "-report-interval", "10ms", "-poll-interval", "10ms"}, strings.NewReader(""), &out, &errb)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
		}
		for _, id := range []string{fxRunning, fxAbort} {
			if h, _ := b.Client.HGetAll(ctx, id).Result(); h["finished_at"] == "" && h["aborted"] != "true" {
				t.Errorf("resumed job %s did not end: %v\n%s", id, h, out.String())
			}
		}
		if h, _ := b.Client.HGetAll(ctx, fxAbort).Result(); h["aborted"] != "true" {
			t.Errorf("the job whose abort was requested: %v", h)
		}
		if n, _ := b.Client.LLen(ctx, "pending:one").Result(); n != 0 {
			t.Errorf("pending:one still has its job: the simulator did not take beside resuming")
		}
		var o2, e2 bytes.Buffer
		if code := run([]string{"simulate-pipeline", "-node", "http://127.0.0.1:1", "-key", "k", "-resume", fxRunning}, strings.NewReader(""), &o2, &e2); code != 1 || !strings.Contains(e2.String(), "-resume is for Redis mode") {
			t.Errorf("-resume in API mode: exit %d, %q", code, e2.String())
		}
	})
}
