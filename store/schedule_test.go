package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// queueJob registers a job of nick for url in queue.
func queueJob(t *testing.T, ctx context.Context, st *store.Store, id, nick, url, queue string) {
	t.Helper()
	j := newJob(id)
	j.StartedBy, j.NickKey, j.URL, j.Queue = nick, strings.ToLower(nick), url, queue
	if err := st.Register(ctx, j); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
}

func addKey(t *testing.T, ctx context.Context, st *store.Store, name string) string {
	t.Helper()
	pub := "ed25519:" + name
	if err := st.AddPipelineKey(ctx, name, pub); err != nil {
		t.Fatal(err)
	}
	return pub
}

func take(t *testing.T, ctx context.Context, st *store.Store, name string, queues ...string) string {
	t.Helper()
	if len(queues) == 0 {
		queues = []string{store.KeyPending}
	}
	j, err := st.APITake(ctx, name, "ed25519:"+name, queues)
	if err != nil {
		t.Fatalf("take by %s: %v", name, err)
	}
	if j == nil {
		return ""
	}
	return j.Ident
}

func list(t *testing.T, b *redistest.Backend, key string) []string {
	t.Helper()
	v, err := b.Client.LRange(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A user at the running limit does not block another user's job, and the
// skipped job keeps its place at the head.
func TestTakeUserLimitSkipsToAnotherUser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		st.SetTakeRules(store.TakeRules{PerUserRunning: 1})
		addKey(t, ctx, st, "pipe-a")
		queueJob(t, ctx, st, "a1", "erin", "http://a1.example.com/", store.KeyPending)
		queueJob(t, ctx, st, "a2", "Erin", "http://a2.example.com/", store.KeyPending)
		queueJob(t, ctx, st, "b1", "bob", "http://b1.example.com/", store.KeyPending)
		if got := take(t, ctx, st, "pipe-a"); got != "a1" {
			t.Fatalf("first take = %q, want a1", got)
		}
		// erin (Erin folded) runs 1 of 1: a2 is skipped, bob's b1 goes.
		if got := take(t, ctx, st, "pipe-a"); got != "b1" {
			t.Fatalf("second take = %q, want b1 (erin is at her limit)", got)
		}
		if got := take(t, ctx, st, "pipe-a"); got != "" {
			t.Fatalf("third take = %q, want nothing", got)
		}
		if got := list(t, b, store.KeyPending); !slices.Equal(got, []string{"a2"}) {
			t.Fatalf("pending = %v, want [a2]", got)
		}
		// erin's running job ends: a2 goes.
		b.Client.LRem(ctx, store.KeyWorking, 1, "a1")
		if got := take(t, ctx, st, "pipe-a"); got != "a2" {
			t.Fatalf("after a1 ended, take = %q, want a2", got)
		}
	})
}

// Ops' jobs are limited unless the rules exempt them.
func TestTakeUserLimitOpsExempt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		for _, id := range []string{"o1", "o2"} {
			j := newJob(id)
			j.StartedBy, j.NickKey, j.URL, j.ByOp = "JAA", "jaa", "http://"+id+".example.com/", true
			if err := st.Register(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		st.SetTakeRules(store.TakeRules{PerUserRunning: 1})
		take(t, ctx, st, "pipe-a")
		if got := take(t, ctx, st, "pipe-a"); got != "" {
			t.Fatalf("op not exempt: second take = %q, want nothing", got)
		}
		st.SetTakeRules(store.TakeRules{PerUserRunning: 1, OpsExempt: true})
		if got := take(t, ctx, st, "pipe-a"); got != "o2" {
			t.Fatalf("ops exempt: take = %q, want o2", got)
		}
	})
}

// A paused queue gives nothing to the API and nothing to a direct
// pipeline's RPOPLPUSH; jobs queued meanwhile wait aside; resume restores
// the order.
func TestPauseHidesQueueAndResumeRestoresOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		for _, id := range []string{"j1", "j2", "j3"} {
			queueJob(t, ctx, st, id, "erin", "http://"+id+".example.com/", store.KeyPending)
		}
		before := list(t, b, store.KeyPending)
		if err := st.PauseQueue(ctx, store.KeyPending, "JAA", "deploy"); err != nil {
			t.Fatal(err)
		}
		if err := st.PauseQueue(ctx, store.KeyPending, "JAA", "again"); err != store.ErrAlreadyPaused {
			t.Fatalf("second pause: %v, want ErrAlreadyPaused", err)
		}
		if got := take(t, ctx, st, "pipe-a"); got != "" {
			t.Fatalf("API take from a paused queue = %q", got)
		}
		if v, err := b.Client.RPopLPush(ctx, store.KeyPending, store.KeyWorking).Result(); err == nil {
			t.Fatalf("direct RPOPLPUSH from a paused queue got %q", v)
		}
		queueJob(t, ctx, st, "j4", "bob", "http://j4.example.com/", store.KeyPending)
		if n := b.Client.Exists(ctx, store.KeyPending).Val(); n != 0 {
			t.Fatalf("a job queued while paused created the queue's list")
		}
		p, err := st.Pauses(ctx)
		if err != nil || len(p) != 1 || p[0].By != "JAA" || p[0].Reason != "deploy" || p[0].Queue != store.KeyPending {
			t.Fatalf("pauses = %+v, %v", p, err)
		}
		if err := st.ResumeQueue(ctx, store.KeyPending); err != nil {
			t.Fatal(err)
		}
		want := append([]string{"j4"}, before...)
		if got := list(t, b, store.KeyPending); !slices.Equal(got, want) {
			t.Fatalf("pending after resume = %v, want %v", got, want)
		}
		if got := take(t, ctx, st, "pipe-a"); got != "j1" {
			t.Fatalf("take after resume = %q, want j1 (the head)", got)
		}
		if err := st.ResumeQueue(ctx, store.KeyPending); err != store.ErrNotPaused {
			t.Fatalf("resume again: %v, want ErrNotPaused", err)
		}
		if err := st.PauseQueue(ctx, "pendng", "JAA", ""); err == nil {
			t.Fatal("pause of an unknown queue name accepted")
		}
	})
}

// Pausing all hides every queue, named ones too, and a named queue
// created while all are paused.
func TestPauseAll(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		queueJob(t, ctx, st, "n1", "erin", "http://n1.example.com/", store.KeyPendingNamed("pipe"))
		queueJob(t, ctx, st, "ao1", "erin", "http://ao1.example.com/", store.KeyPendingAO)
		if err := st.PauseQueue(ctx, store.PauseAll, "JAA", "incident"); err != nil {
			t.Fatal(err)
		}
		queueJob(t, ctx, st, "m1", "erin", "http://m1.example.com/", store.KeyPendingNamed("other"))
		all := []string{store.KeyPendingNamed("pipe"), store.KeyPendingNamed("other"), store.KeyPending, store.KeyPendingAO}
		if got := take(t, ctx, st, "pipe-a", all...); got != "" {
			t.Fatalf("take while all paused = %q", got)
		}
		if err := st.ResumeQueue(ctx, store.KeyPendingAO); err != store.ErrAllPaused {
			t.Fatalf("resume one queue while all paused: %v", err)
		}
		if err := st.ResumeQueue(ctx, store.PauseAll); err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			id := take(t, ctx, st, "pipe-a", all...)
			if id == "" {
				break
			}
			got = append(got, id)
		}
		if want := []string{"n1", "m1", "ao1"}; !slices.Equal(got, want) {
			t.Fatalf("after resume took %v, want %v", got, want)
		}
	})
}

// Pausing "all" sets aside a queue created between the node's read of the
// queue index and the pause script: the script checks the index itself.
// The old pause left it under its name, open to direct pipelines
// (RPOPLPUSH), and the resume of "all" likewise.
func TestPauseAllCatchesQueueCreatedMeanwhile(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		late := store.KeyPendingNamed("late")
		once := true
		st.SetBeforePauseScriptForTest(func() {
			if once {
				once = false
				queueJob(t, ctx, st, "l1", "erin", "http://l1.example.com/", late)
			}
		})
		if err := st.PauseQueue(ctx, store.PauseAll, "JAA", "incident"); err != nil {
			t.Fatal(err)
		}
		if got := list(t, b, late); len(got) != 0 {
			t.Fatalf("%s created while all was being paused holds %v under its name: a direct pipeline takes it", late, got)
		}
		if got := list(t, b, store.KeyPausedQueue(late)); !slices.Equal(got, []string{"l1"}) {
			t.Fatalf("set aside: %v, want [l1]", got)
		}
		once = true
		st.SetBeforePauseScriptForTest(func() {
			if once {
				once = false
				// While all is paused, a new queue's jobs go aside.
				queueJob(t, ctx, st, "r1", "erin", "http://r1.example.com/", store.KeyPendingNamed("later"))
			}
		})
		if err := st.ResumeQueue(ctx, store.PauseAll); err != nil {
			t.Fatal(err)
		}
		if got := list(t, b, store.KeyPendingNamed("later")); !slices.Equal(got, []string{"r1"}) {
			t.Fatalf("a queue created while all was being resumed: %v under its name, want [r1] (left aside for ever)", got)
		}
	})
}

// An avoided site goes to another pipeline; the avoiding one takes the
// next job instead.
func TestTakeAvoidGoesToAnotherPipeline(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		addKey(t, ctx, st, "pipe-b")
		if err := st.SetPipelineKeyAvoid(ctx, "pipe-a", []string{"squarespace.com"}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetPipelineKeyAvoidSelf(ctx, "pipe-a", []string{"xn--bcher-kva.example"}); err != nil {
			t.Fatal(err)
		}
		queueJob(t, ctx, st, "sq", "erin", "http://shop.SquareSpace.com:80/x", store.KeyPending)
		queueJob(t, ctx, st, "bu", "erin", "http://www.xn--bcher-kva.example/", store.KeyPending)
		queueJob(t, ctx, st, "ok", "erin", "http://notsquarespace.com/", store.KeyPending)
		if got := take(t, ctx, st, "pipe-a"); got != "ok" {
			t.Fatalf("pipe-a took %q, want ok (it avoids the two before it)", got)
		}
		if got := take(t, ctx, st, "pipe-a"); got != "" {
			t.Fatalf("pipe-a took %q, want nothing", got)
		}
		if got := take(t, ctx, st, "pipe-b"); got != "sq" {
			t.Fatalf("pipe-b took %q, want sq", got)
		}
	})
}

// A targeted-only key takes only pending:NAME jobs.
func TestTakeTargetedOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		if err := st.SetPipelineKeyTargetedOnly(ctx, "pipe-a", true); err != nil {
			t.Fatal(err)
		}
		queueJob(t, ctx, st, "p1", "erin", "http://p1.example.com/", store.KeyPending)
		queueJob(t, ctx, st, "t1", "erin", "http://t1.example.com/", store.KeyPendingNamed("pipe-a"))
		qs := []string{store.KeyPendingNamed("pipe-a"), store.KeyPending, store.KeyPendingAO}
		if got := take(t, ctx, st, "pipe-a", qs...); got != "t1" {
			t.Fatalf("took %q, want t1", got)
		}
		if got := take(t, ctx, st, "pipe-a", qs...); got != "" {
			t.Fatalf("targeted-only key took %q from pending", got)
		}
	})
}

// The scan is bounded: a take examines at most ScanLimit jobs, and says
// when the bound stopped it.
func TestTakeScanBound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		st.SetTakeRules(store.TakeRules{ScanLimit: 5})
		addKey(t, ctx, st, "pipe-a")
		if err := st.SetPipelineKeyAvoid(ctx, "pipe-a", []string{"example.com"}); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			queueJob(t, ctx, st, fmt.Sprintf("e%d", i), "erin", fmt.Sprintf("http://e%d.example.com/", i), store.KeyPending)
		}
		queueJob(t, ctx, st, "far", "erin", "http://example.org/", store.KeyPending)
		j, stats, err := st.APITakeStats(ctx, "pipe-a", "ed25519:pipe-a", []string{store.KeyPending})
		if err != nil || j != nil || !stats.BoundHit || stats.Skipped != 5 {
			t.Fatalf("take = %v, %+v, %v; want nothing, bound hit, 5 skipped", j, stats, err)
		}
		st.SetTakeRules(store.TakeRules{ScanLimit: 100})
		if got := take(t, ctx, st, "pipe-a"); got != "far" {
			t.Fatalf("with a larger bound took %q, want far", got)
		}
		if got := len(list(t, b, store.KeyPending)); got != 8 {
			t.Fatalf("skipped jobs lost their place: %d left", got)
		}
	})
}

// A queue filled past the bound with jobs the key avoids does not shadow
// the next queue: pending:NAME, which anyone can fill with !ao
// --pipeline=NAME, is tried first, and the bound is each queue's. The old
// bound stopped the whole take: {"job":null} while pending-ao held a job.
func TestTakeScanBoundPerQueue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		st.SetTakeRules(store.TakeRules{ScanLimit: 5})
		addKey(t, ctx, st, "victim")
		if err := st.SetPipelineKeyAvoid(ctx, "victim", []string{"example.com"}); err != nil {
			t.Fatal(err)
		}
		named := store.KeyPendingNamed("victim")
		for i := range 8 {
			queueJob(t, ctx, st, fmt.Sprintf("e%d", i), "mallory", fmt.Sprintf("http://e%d.example.com/", i), named)
		}
		queueJob(t, ctx, st, "real", "erin", "http://example.org/", store.KeyPendingAO)
		j, stats, err := st.APITakeStats(ctx, "victim", "ed25519:victim", []string{named, store.KeyPendingAO})
		if err != nil || j == nil || j.Ident != "real" {
			t.Fatalf("take = %v, %+v, %v; want job real from %s past the %d avoided jobs of %s", j, stats, err, store.KeyPendingAO, 8, named)
		}
		if !stats.BoundHit || stats.Skipped != 5 {
			t.Errorf("stats %+v: want the bound hit on %s and its 5 examined jobs skipped", stats, named)
		}
		if got := len(list(t, b, named)); got != 8 {
			t.Fatalf("skipped jobs lost their place: %d left", got)
		}
	})
}

// Two pipelines racing for the last job the limit allows: exactly one
// gets it.
func TestTakeRaceForLastAllowedJob(t *testing.T) {
	rounds := 50
	if testing.Short() {
		rounds = 10
	}
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		st.SetTakeRules(store.TakeRules{PerUserRunning: 1})
		addKey(t, ctx, st, "pipe-a")
		addKey(t, ctx, st, "pipe-b")
		for r := range rounds {
			b.Client.Del(ctx, store.KeyWorking, store.KeyPending)
			for i := range 3 {
				queueJob(t, ctx, st, fmt.Sprintf("r%d-%d", r, i), "erin", fmt.Sprintf("http://r%d-%d.example.com/", r, i), store.KeyPending)
			}
			var wg sync.WaitGroup
			got := make([]string, 2)
			for k, name := range []string{"pipe-a", "pipe-b"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					j, err := st.APITake(ctx, name, "ed25519:"+name, []string{store.KeyPending})
					if err != nil {
						t.Error(err)
						return
					}
					if j != nil {
						got[k] = j.Ident
					}
				}()
			}
			wg.Wait()
			n := 0
			for _, g := range got {
				if g != "" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("round %d: %d pipelines took a job (%v), want exactly 1", r, n, got)
			}
		}
	})
}

// The dashboard's list (/jobs, ActiveJobs) shows a paused queue's jobs:
// they are queued, waiting aside, in their queue's order, the jobs queued
// during the pause behind the others.
func TestActiveJobsListsPausedQueue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		for _, id := range []string{"j1", "j2"} {
			queueJob(t, ctx, st, id, "erin", "http://"+id+".example.com/", store.KeyPending)
		}
		if err := st.PauseQueue(ctx, store.KeyPending, "JAA", "deploy"); err != nil {
			t.Fatal(err)
		}
		queueJob(t, ctx, st, "j3", "bob", "http://j3.example.com/", store.KeyPending)
		jobs, err := st.ActiveJobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			got = append(got, fmt.Sprintf("%s %s %d", j.Ident, j.Queue, j.Position))
		}
		want := []string{"j1 pending 1", "j2 pending 2", "j3 pending 3"}
		if !slices.Equal(got, want) {
			t.Fatalf("active jobs while pending is paused = %q, want %q", got, want)
		}
	})
}

// A job failed or aborted while its queue is paused leaves the list it
// waits in aside, so the resume does not bring it back to be taken (the
// long soak: a !fail during a pause of all queues; ten minutes later a
// direct pipeline took the failed job).
func TestFailAndAbortWhilePausedLeaveTheQueue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		for _, id := range []string{"j1", "j2", "j3"} {
			queueJob(t, ctx, st, id, "erin", "http://"+id+".example.com/", store.KeyPending)
		}
		if err := st.PauseQueue(ctx, store.PauseAll, "JAA", "deploy"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.FailJobBy(ctx, "j1", "no", "op"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.AbortBy(ctx, "j2", "op"); err != nil {
			t.Fatal(err)
		}
		if got := list(t, b, store.KeyPausedQueue(store.KeyPending)); !slices.Equal(got, []string{"j3"}) {
			t.Errorf("paused list after a fail and an abort = %v, want [j3]", got)
		}
		if err := st.ResumeQueue(ctx, store.PauseAll); err != nil {
			t.Fatal(err)
		}
		if got := list(t, b, store.KeyPending); !slices.Equal(got, []string{"j3"}) {
			t.Fatalf("pending after resume = %v, want [j3]: a failed or aborted job came back", got)
		}
	})
}
