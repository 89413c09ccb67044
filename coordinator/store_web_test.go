package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// The finish notifier puts every job it reports into the index of
// finished jobs, which /finished reads instead of scanning the keyspace.
func TestFinishNotifierIndexesFinishedJobs(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := store.NewStore(b.Client)
		done := svcQueue(t, s, "http://finished.example.com/", "alice", "#ab", store.KeyPending)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "sim"})
		j, err := p.Take(ctx)
		if err != nil || j == nil || j.Ident != done {
			t.Fatalf("take: %v %v", j, err)
		}
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := s.FinishedJobs(ctx)
		if err != nil || len(got) != 0 {
			t.Fatalf("before the notifier: %v %v", got, err)
		}
		f := NewFinishNotifier(s, newSvcAnnouncer("#ab"), FinishConfig{}, svcLog(t))
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		got, err = s.FinishedJobs(ctx)
		if err != nil || len(got) != 1 || got[0].Ident != done || got[0].Job == nil || got[0].Job.Get("finished_at") == "" {
			t.Fatalf("after the notifier: %+v %v", got, err)
		}
	})
}

// Index entries whose job and failure records have expired are dropped
// when read; entries older than the failure records' lifetime are pruned
// when one is added; failure records carry what operators need.
func TestFinishedIndexExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := store.NewStore(b.Client)
		now := time.Unix(1732900000, 0)
		s.Now = func() time.Time { return now }
		c := b.Client
		c.HSet(ctx, "gone", "url", "http://gone.example.com/", "finished_at", "1732800000.5")
		c.HSet(ctx, "old", "url", "http://old.example.com/", "finished_at", "1000")
		c.HSet(ctx, "live", "url", "http://live.example.com/", "finished_at", "1732899999")
		c.HSet(ctx, "running", "url", "http://running.example.com/", "started_at", "1732899999")
		for _, id := range []string{"gone", "old", "running", "live", "nosuch"} {
			if err := s.IndexFinished(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		// "old" was pruned by the later calls (older than FailureTTL);
		// "running" and "nosuch" have no finished_at.
		ids, _ := c.ZRange(ctx, store.KeyFinishedIndex, 0, -1).Result()
		if len(ids) != 2 || ids[0] != "gone" || ids[1] != "live" {
			t.Fatalf("index %v", ids)
		}
		c.Del(ctx, "gone") // its 48 h expiry ran out
		got, err := s.FinishedJobs(ctx)
		if err != nil || len(got) != 1 || got[0].Ident != "live" {
			t.Fatalf("finished %+v %v", got, err)
		}
		if ids, _ := c.ZRange(ctx, store.KeyFinishedIndex, 0, -1).Result(); len(ids) != 1 {
			t.Fatalf("stale entry not removed: %v", ids)
		}

		// A failure record, with the job record it outlives.
		f := store.Failure{Ident: "failedjob", URL: "http://f.example.com/", Reason: "no heartbeat for 2h0m",
			FailedBy: "reaper", Queue: store.KeyWorking, Job: map[string]string{"fetch_depth": "inf", "started_by": "alice"},
			Extra: map[string]string{"pipeline_nick": "p1"}}
		if err := s.RecordFailure(ctx, f); err != nil {
			t.Fatal(err)
		}
		ttl, _ := c.TTL(ctx, store.KeyFailed("failedjob")).Result()
		if ttl <= 0 || ttl > store.FailureTTL {
			t.Fatalf("failure record TTL %v", ttl)
		}
		r, err := s.GetFailure(ctx, "failedjob")
		if err != nil || r == nil || r.Reason != f.Reason || r.FailedBy != "reaper" || r.FailedAt != 1732900000 ||
			r.Queue != store.KeyWorking || r.Job["started_by"] != "alice" || r.Extra["pipeline_nick"] != "p1" {
			t.Fatalf("failure %+v %v", r, err)
		}
		got, _ = s.FinishedJobs(ctx)
		if len(got) != 2 || got[1].Ident != "failedjob" || got[1].Failure == nil || got[1].Job != nil {
			t.Fatalf("finished with failure %+v", got)
		}

		// A key of ours holding something else is refused, nothing written.
		c.Set(ctx, store.KeyFailed("clash"), "x", 0)
		if err := s.RecordFailure(ctx, store.Failure{Ident: "clash"}); !errors.Is(err, store.ErrWrongType) {
			t.Fatalf("clash: %v", err)
		}
		if n, _ := c.ZScore(ctx, store.KeyFinishedIndex, "clash").Result(); n != 0 {
			t.Fatalf("clash indexed")
		}
	})
}

// A queued job's place: the right end of a queue is its head.
func TestJobDetailPosition(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := store.NewStore(b.Client)
		a := svcQueue(t, s, "http://a.example.com/", "alice", "#ab", store.KeyPending)
		bb := svcQueue(t, s, "http://b.example.com/", "alice", "#ab", store.KeyPending)
		n := svcQueue(t, s, "http://n.example.com/", "alice", "#ab", store.KeyPendingNamed("x"))
		for id, want := range map[string]struct {
			q      string
			pos, l int64
		}{a: {store.KeyPending, 1, 2}, bb: {store.KeyPending, 2, 2}, n: {"pending:x", 1, 1}} {
			d, err := s.JobDetail(ctx, id)
			if err != nil || d == nil || d.Queue != want.q || d.Position != want.pos || d.QueueLen != want.l {
				t.Errorf("%s: %+v %v, want %+v", id, d, err, want)
			}
		}
		if d, err := s.JobDetail(ctx, "nosuchjob"); d != nil || err != nil {
			t.Errorf("unknown: %+v %v", d, err)
		}
	})
}
