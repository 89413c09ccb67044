package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// A command's fail queues its channel line in the fail's own
// atomic step, and only when the fail happens: a fail of a job that is
// failed already, finished by its pipeline, or absent queues nothing.
func TestFailJobReportedQueuesOnlyARealFail(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		notices := func() []string {
			t.Helper()
			v, err := b.Client.LRange(ctx, store.KeyAdminNotices, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		calls := 0
		line := func(j *record.Job) store.AdminNotice {
			calls++
			return store.AdminNotice{Channel: j.StartedIn.Value, Text: j.StartedBy.Value + ": " + j.Ident + " for " + j.URL.Value + " failed"}
		}
		if err := s.Register(ctx, newJob("job1")); err != nil {
			t.Fatal(err)
		}
		job, err := s.FailJobReported(ctx, "job1", "failed by carol", "carol", line)
		if err != nil || !job.Failed {
			t.Fatalf("fail: %v, %+v", err, job)
		}
		got := notices()
		if len(got) != 1 {
			t.Fatalf("admin notices after the fail: %q, want one", got)
		}
		var n store.AdminNotice
		if err := json.Unmarshal([]byte(got[0]), &n); err != nil {
			t.Fatal(err)
		}
		if n.Channel != "#archivebot" || n.Text != "alice: job1 for http://example.com/ failed" {
			t.Fatalf("notice %+v", n)
		}
		// Failed already: refused, nothing more queued.
		if _, err := s.FailJobReported(ctx, "job1", "failed by carol", "carol", line); !errors.Is(err, store.ErrJobFinished) {
			t.Fatalf("second fail: %v", err)
		}
		// No such job.
		if _, err := s.FailJobReported(ctx, "nojob", "failed by carol", "carol", line); !errors.Is(err, store.ErrNoJob) {
			t.Fatalf("fail of no job: %v", err)
		}
		// Finished by its pipeline: its finish report speaks for it.
		if err := s.Register(ctx, newJob("job2")); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.HSet(ctx, "job2", "finished_at", "1700000000").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FailJobReported(ctx, "job2", "failed by carol", "carol", line); !errors.Is(err, store.ErrJobFinished) {
			t.Fatalf("fail of a finished job: %v", err)
		}
		// The script itself queues nothing for a job that finished after
		// the read (the notice is built, the fail does not happen).
		if _, err := s.FailJobNotice(ctx, "job2", "failed by carol", "carol", &store.AdminNotice{Text: "x"}); !errors.Is(err, store.ErrJobFinished) {
			t.Fatalf("FailJobNotice of a finished job: %v", err)
		}
		if got := notices(); len(got) != 1 || calls != 1 {
			t.Fatalf("after refused fails: notices %q, line built %d times; want 1 and 1", got, calls)
		}
	})
}
