package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// TestReaperTimers checks the death-timer fields exactly as upstream kept
// them, one cycle per seeded job state.
func TestReaperTimers(t *testing.T) {
	tests := []struct {
		name string
		seed map[string]string // job hash; the job is in working
		want map[string]string // job hash after one cycle
	}{
		{
			name: "no heartbeat yet: skipped",
			seed: map[string]string{"url": "u"},
			want: map[string]string{"url": "u"},
		},
		{
			name: "first heartbeat: acknowledged, nothing else",
			seed: map[string]string{"url": "u", "heartbeat": "5"},
			want: map[string]string{"url": "u", "heartbeat": "5", "last_acknowledged_heartbeat": "5"},
		},
		{
			name: "heartbeat advanced: timer reset",
			seed: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "5", "death_timer": "40"},
			want: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9", "death_timer": "0"},
		},
		{
			name: "no progress: timer climbs",
			seed: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9"},
			want: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9", "death_timer": "1"},
		},
		{
			name: "no progress again",
			seed: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9", "death_timer": "41"},
			want: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9", "death_timer": "42"},
		},
		{
			name: "finished job still in working: left alone",
			seed: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9", "finished_at": "1.5"},
			want: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9", "finished_at": "1.5"},
		},
		{
			name: "failed job still in working: left alone",
			seed: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9", "failed": "true"},
			want: map[string]string{"url": "u", "heartbeat": "9", "last_acknowledged_heartbeat": "9", "failed": "true"},
		},
		{
			// A pipeline that took the job and died (or was revoked)
			// before its first heartbeat: the timer runs from the take.
			name: "taken, no heartbeat yet: counts as heartbeat 0",
			seed: map[string]string{"url": "u", "started_at": "1.5"},
			want: map[string]string{"url": "u", "started_at": "1.5", "last_acknowledged_heartbeat": "0"},
		},
		{
			name: "taken, still no heartbeat: timer climbs",
			seed: map[string]string{"url": "u", "started_at": "1.5", "last_acknowledged_heartbeat": "0", "death_timer": "7"},
			want: map[string]string{"url": "u", "started_at": "1.5", "last_acknowledged_heartbeat": "0", "death_timer": "8"},
		},
	}
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		for i, tc := range tests {
			id := fmt.Sprintf("timerjob%d", i)
			b.Client.HSet(ctx, id, tc.seed)
			b.Client.LPush(ctx, store.KeyWorking, id)
		}
		// A ghost in working (record expired) must not stop the cycle.
		b.Client.LPush(ctx, store.KeyWorking, "ghostjob")
		ann := newSvcAnnouncer("#ab")
		r := NewReaper(st, ann, ReaperConfig{Threshold: 100}, svcLog(t))
		if err := r.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		for i, tc := range tests {
			got, err := b.Client.HGetAll(ctx, fmt.Sprintf("timerjob%d", i)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.name, diff)
			}
		}
		if n, _ := b.Client.Exists(ctx, "ghostjob").Result(); n != 0 {
			t.Error("the reaper created a record for an ident without one")
		}
		if l := ann.take(); len(l) != 0 {
			t.Errorf("announced %v", l)
		}
	})
}

// reaperScenario queues a job, lets a simulated pipeline take it and
// heartbeat, then "crash" (stop heartbeating).
func reaperScenario(t *testing.T, b *redistest.Backend) (*store.Store, string, *pipelinesim.Job) {
	t.Helper()
	ctx := context.Background()
	s := store.New(b.Client)
	id := svcQueue(t, s, "http://dies.example.net/", "alice", "#ab", store.KeyPending)
	p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "crashy"})
	if err := p.Report(ctx, ""); err != nil {
		t.Fatal(err)
	}
	j, err := p.Take(ctx)
	if err != nil || j == nil || j.Ident != id {
		t.Fatalf("take: %v %v", j, err)
	}
	return s, id, j
}

func deathTimer(t *testing.T, b *redistest.Backend, id string) string {
	t.Helper()
	v, _ := b.Client.HGet(context.Background(), id, "death_timer").Result()
	return v
}

// TestReaperCrashedJob: while the pipeline heartbeats the timer stays at
// zero; once it crashed the timer climbs one per cycle, the death is
// announced exactly once at the threshold, and not again afterwards.
func TestReaperCrashedJob(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s, id, j := reaperScenario(t, b)
		ann := newSvcAnnouncer("#ab", "#other")
		r := NewReaper(s, ann, ReaperConfig{Interval: 2 * time.Second, Threshold: 3}, svcLog(t))
		var timers []string
		for range 3 { // alive
			if err := j.Heartbeat(ctx); err != nil {
				t.Fatal(err)
			}
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			timers = append(timers, deathTimer(t, b, id))
		}
		for range 5 { // crashed
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			timers = append(timers, deathTimer(t, b, id))
		}
		// The first cycle only acknowledges the first heartbeat.
		if diff := cmp.Diff([]string{"", "0", "0", "1", "2", "3", "4", "5"}, timers); diff != "" {
			t.Errorf("death_timer per cycle (-want +got):\n%s", diff)
		}
		want := []svcLine{{"#ab", fmt.Sprintf(`alice: Job %s <http://dies.example.net/> has had no heartbeat for 6s on pipeline "crashy"; it may be dead (an op can !fail %s).`, id, id)}}
		if diff := cmp.Diff(want, ann.take()); diff != "" {
			t.Errorf("announcements (-want +got):\n%s", diff)
		}
		job, _ := s.GetJob(ctx, id)
		if job.State() != record.StateRunning {
			t.Errorf("without auto_fail the job is %v, want still running", job.State())
		}

		// It comes back to life, then dies again: announced again.
		if err := j.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := ann.take(); len(got) != 1 || !strings.Contains(got[0].Text, "no heartbeat") {
			t.Errorf("second death: %v, want one announcement", got)
		}
	})
}

// TestReaperAutoFail: a dead job is failed atomically (out of working,
// jobs_failed, 5 s expiry) with its death line queued in the same step,
// and the line reaches the channel once, with IRC down for a while in
// between (the admin notifier delivers it at least once).
func TestReaperAutoFail(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s, id, j := reaperScenario(t, b)
		if err := j.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		ann := newSvcAnnouncer("#ab")
		r := NewReaper(s, ann, ReaperConfig{Interval: time.Minute, Threshold: 2, AutoFail: true}, svcLog(t))
		an := NewAdminNotifier(s, ann, svcLog(t))
		ann.setDown(errIRCDown)
		for range 4 { // acknowledge, silent checks, the death
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := an.runOnce(ctx); err == nil {
			t.Error("admin notices delivered with IRC down")
		}
		job, _ := s.GetJob(ctx, id)
		if job == nil || job.State() != record.StateFailed || job.Get("failed_reason") != "no heartbeat for 2m" {
			t.Fatalf("job after auto-fail: %+v", job)
		}
		ann.setDown(nil)
		for range 3 {
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if err := an.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := []svcLine{{"#ab", fmt.Sprintf(`alice: Job %s <http://dies.example.net/> has had no heartbeat for 2m on pipeline "crashy"; it has been marked as failed.`, id)}}
		if diff := cmp.Diff(want, ann.take()); diff != "" {
			t.Errorf("announcements (-want +got):\n%s", diff)
		}
		ttl, _ := b.Client.TTL(ctx, id).Result()
		working, _ := b.Client.LRange(ctx, store.KeyWorking, 0, -1).Result()
		failed, _ := b.Client.Get(ctx, store.KeyJobsFailed).Result()
		reported, _ := b.Client.SMembers(ctx, store.KeyReaperReported).Result()
		got := fmt.Sprintf("%v %v %s %v", ttl > 0 && ttl <= 5*time.Second, working, failed, reported)
		if want := "true [] 1 []"; got != want {
			t.Errorf("ttl≤5s, working, jobs_failed, reported = %s, want %s", got, want)
		}
	})
}

// finishingAnnouncer is an announcer during whose Announce the job's
// pipeline marks it done: the race of a pipeline that comes back and
// finishes while the reaper deals with its job.
type finishingAnnouncer struct {
	*svcAnnouncer
	ctx context.Context
	job *pipelinesim.Job
	t   *testing.T
}

func (a *finishingAnnouncer) Announce(ctx context.Context, channel, text string) error {
	if a.job != nil {
		if err := a.job.Done(a.ctx); err != nil {
			a.t.Error(err)
		}
		a.job = nil
	}
	return a.svcAnnouncer.Announce(ctx, channel, text)
}

// TestReaperSaysFailedOnlyWhenFailed: the channel hears "it has been
// marked as failed" only for a job that was failed. The chaos soak saw the
// reaper announce the death of an API job, then lose the fail to the
// pipeline's done 30 ms later: "marked as failed", then "has finished",
// and Redis said finished. Here the pipeline finishes while the line is
// being said; the job's state must match what was said.
func TestReaperSaysFailedOnlyWhenFailed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s, id, j := reaperScenario(t, b)
		if err := j.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		ann := &finishingAnnouncer{svcAnnouncer: newSvcAnnouncer("#ab"), ctx: ctx, job: j, t: t}
		r := NewReaper(s, ann, ReaperConfig{Interval: time.Minute, Threshold: 2, AutoFail: true}, svcLog(t))
		an := NewAdminNotifier(s, ann, svcLog(t))
		for range 5 {
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if err := an.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		f, err := s.GetFailure(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		job, _ := s.GetJob(ctx, id)
		state := record.StateOf(job, f, false)
		for _, l := range ann.take() {
			if strings.Contains(l.Text, "marked as failed") && state != record.StateFailed {
				t.Errorf("the channel heard %q, but the job is %s", l.Text, state)
			}
		}
	})
}

// TestReaperRoundTrips: one cycle is one round trip whatever the number
// of working jobs.
func TestReaperRoundTrips(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		// One cycle first loads the script (EVAL caches it), so EVALSHA
		// does not fall back to EVAL in the counted cycles.
		if err := NewReaper(st, newSvcAnnouncer("#ab"), ReaperConfig{}, svcLog(t)).runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, n := range []int{10, 300} {
			seedWorking(t, b.Client, n)
			c, rt := countingClient(t, b)
			if err := c.Ping(ctx).Err(); err != nil { // dial outside the count
				t.Fatal(err)
			}
			rt.Store(0)
			r := NewReaper(store.New(c), newSvcAnnouncer("#ab"), ReaperConfig{}, svcLog(t))
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			got = append(got, rt.Load())
		}
		if diff := cmp.Diff([]int64{1, 1}, got); diff != "" {
			t.Errorf("round trips at 10 and 300 jobs (-want +got):\n%s", diff)
		}
	})
}

// TestFailureRecordFromReaper: the reaper's auto-fail writes the failure
// record (failed_by reaper, the pipeline in the reason) in the fail step.
func TestFailureRecordFromReaper(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	s := store.New(b.Client)
	id := svcQueue(t, s, "http://reaped.example.com/", "alice", "#ab", store.KeyPending)
	b.Client.SAdd(ctx, store.KeyIgnores(id), "/x/")
	p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "reaped-pipe"})
	if err := p.Report(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Take(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FailJobBy(ctx, id, "no heartbeat for 2h0m", "reaper"); err != nil {
		t.Fatal(err)
	}
	f, err := s.GetFailure(ctx, id)
	if err != nil || f == nil {
		t.Fatalf("failure record: %v %v", f, err)
	}
	if f.FailedBy != "reaper" || f.Queue != store.KeyWorking || f.Job["started_by"] != "alice" || f.Extra["origin_queue"] != store.KeyPending ||
		f.Extra["pipeline"] != "reaped-pipe" || f.Job["pipeline_id"] != p.Key() {
		t.Errorf("failure record %+v", f)
	}
	var ign []string
	if err := json.Unmarshal([]byte(f.Extra["ignores"]), &ign); err != nil || !slices.Equal(ign, []string{"/x/", "global-pattern"}) {
		t.Errorf("ignores %q: %v", f.Extra["ignores"], err)
	}
	if ttl, _ := b.Client.TTL(ctx, store.KeyFailed(id)).Result(); ttl != store.FailureTTL {
		t.Errorf("failure record TTL %v", ttl)
	}
}

// The reaper removes ghost job hashes: after !fail
// on a running job, the pipeline's late writes re-create the hash without
// url (and its log); the reaper's ghost pass deletes both, and leaves live
// jobs, the failure record and other programs' keys alone.
func TestReaperRemovesGhosts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"})
		ghost := svcQueue(t, st, "http://ghost.example/", "alice", "#ab", store.KeyPending)
		j := mustTake(t, ctx, p)
		live := svcQueue(t, st, "http://live.example/", "alice", "#ab", store.KeyPending)
		lj := mustTake(t, ctx, p)
		if _, err := st.FailJobBy(ctx, ghost, "failed by alice", "alice"); err != nil {
			t.Fatal(err)
		}
		b.Client.Del(ctx, ghost, store.KeyLog(ghost), store.KeyIgnores(ghost)) // the 5 s expiry
		for _, pj := range []*pipelinesim.Job{j, lj} {
			if err := pj.Heartbeat(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := pj.LogDownload(ctx, "http://x.example/late", 200); err != nil {
				t.Fatal(err)
			}
		}
		b.Client.Set(ctx, "strjunk", "x", 0)
		b.Client.ZAdd(ctx, store.KeyFinishedIndex, redis.Z{Score: 1, Member: "strjunk"})
		if n, _ := b.Client.Exists(ctx, ghost, store.KeyLog(ghost)).Result(); n != 2 {
			t.Fatalf("the late writes left %d of the ghost's hash and log, want both", n)
		}

		logs, log := newLogCounter(t)
		r := NewReaper(st, newSvcAnnouncer("#ab"), ReaperConfig{Threshold: 100}, log)
		if err := r.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := b.Client.Exists(ctx, ghost, store.KeyLog(ghost)).Result(); n != 2 {
			t.Errorf("the first cycle after the start removed ghosts (%d left), want them left for a minute", n)
		}
		r.ghostsAt = time.Time{} // a minute later
		if err := r.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := b.Client.Exists(ctx, ghost, store.KeyLog(ghost)).Result(); n != 0 {
			t.Errorf("%d of the ghost's hash and log left after the ghost pass", n)
		}
		if n, _ := b.Client.Exists(ctx, live, store.KeyLog(live), store.KeyFailed(ghost), "strjunk").Result(); n != 4 {
			t.Errorf("the ghost pass removed a live job, its log, the failure record or another key (%d of 4 left)", n)
		}
		said := 0
		for _, l := range logs.lines {
			if strings.Contains(l, "removed ghost job records") && strings.Contains(l, "first="+ghost) {
				said++
			}
		}
		if said != 1 {
			t.Errorf("%d log lines saying the ghost was removed, want 1", said)
		}
	})
}
