package coordinator

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

func TestJobWatchLogsTakenAndFailed(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		var buf bytes.Buffer
		w := NewStartNotifier(s, nil, StartConfig{}, slog.New(slog.NewTextHandler(&buf, nil)))
		// What a scan does with what it read of working.
		observe := func() {
			t.Helper()
			ids, err := s.WorkingJobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w.rememberWorking(ctx, ids)
		}
		observe()
		id := svcQueue(t, s, "http://watch.example.com/", "alice", "#ab", store.KeyPending)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "w"})
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		observe()
		if _, err := s.FailJob(ctx, id, "failed by op"); err != nil {
			t.Fatal(err)
		}
		observe()
		log := buf.String()
		for _, want := range []string{
			`level=INFO msg="jobs running at start" service=jobs count=0`,
			`level=INFO msg="job taken by a pipeline" service=jobs ident=` + id,
			`level=INFO msg="job failed" service=jobs ident=` + id + ` reason="failed by op"`,
		} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %s:\n%s", want, log)
			}
		}
	})
}
