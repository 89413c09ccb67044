package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// takeID takes for name with take_id id from pending; it returns the job
// ("" for none) and whether it was answered again.
func takeID(t *testing.T, ctx context.Context, st *store.Store, name, id string) (string, bool) {
	t.Helper()
	j, err := st.APITakeID(ctx, name, "ed25519:"+name, id, []string{store.KeyPending})
	if err != nil {
		t.Fatalf("take by %s with take_id %s: %v", name, id, err)
	}
	if j == nil {
		return "", false
	}
	return j.Ident, j.Replayed
}

func held(t *testing.T, b *redistest.Backend, name string) []string {
	t.Helper()
	m, err := b.Client.SMembers(context.Background(), store.KeyPipelineKeyJobs(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// A take whose answer was lost is retried with the same take_id: it gets
// the same job, and the queue lost one job, not two. Another key's
// take_id of the same text is its own.
func TestTakeIDAnswersTheSameJobAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		addKey(t, ctx, st, "pipe-b")
		for _, id := range []string{"j1", "j2", "j3"} {
			queueJob(t, ctx, st, id, "erin", "http://"+id+".example.com/", store.KeyPending)
		}
		first, again := takeID(t, ctx, st, "pipe-a", "take-0001")
		if first != "j1" || again {
			t.Fatalf("first take = %q (again %v), want j1, new", first, again)
		}
		started := b.Client.HGet(ctx, store.KeyJob("j1"), "started_at").Val()
		got, again := takeID(t, ctx, st, "pipe-a", "take-0001")
		if got != "j1" || !again {
			t.Fatalf("retry with the same take_id = %q (again %v), want j1 answered again", got, again)
		}
		if got := list(t, b, store.KeyPending); !slices.Equal(got, []string{"j3", "j2"}) {
			t.Fatalf("pending = %v, want [j3 j2]: the retry took a second job", got)
		}
		if got := list(t, b, store.KeyWorking); !slices.Equal(got, []string{"j1"}) {
			t.Fatalf("working = %v, want [j1]", got)
		}
		if got := held(t, b, "pipe-a"); !slices.Equal(got, []string{"j1"}) {
			t.Fatalf("pipe-a holds %v, want [j1]", got)
		}
		if s := b.Client.HGet(ctx, store.KeyJob("j1"), "started_at").Val(); s != started {
			t.Fatalf("the retry rewrote started_at %s to %s", started, s)
		}
		// The same text from another key is another take.
		if got, again := takeID(t, ctx, st, "pipe-b", "take-0001"); got != "j2" || again {
			t.Fatalf("pipe-b with pipe-a's take_id took %q (again %v), want j2, new", got, again)
		}
		if got := held(t, b, "pipe-a"); !slices.Equal(got, []string{"j1"}) {
			t.Fatalf("pipe-a holds %v, want [j1]", got)
		}
		// A take without a take_id remembers nothing, and a new take_id
		// takes a new job.
		if got := take(t, ctx, st, "pipe-a"); got != "j3" {
			t.Fatalf("take without take_id = %q, want j3", got)
		}
		if n := b.Client.HLen(ctx, store.KeyPipelineKeyTakeIDs("pipe-a")).Val(); n != 1 {
			t.Fatalf("pipe-a remembers %d take_ids, want 1", n)
		}
	})
}

// A take_id whose job the key no longer holds (done, rerouted, failed)
// takes as any take, and then answers its new job again.
func TestTakeIDAfterTheJobEndedTakesAnew(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		for _, id := range []string{"j1", "j2", "j3", "j4", "j5"} {
			queueJob(t, ctx, st, id, "erin", "http://"+id+".org/", store.KeyPending)
		}
		if got, _ := takeID(t, ctx, st, "pipe-a", "take-0001"); got != "j1" {
			t.Fatalf("take = %q, want j1", got)
		}
		if _, err := st.APIDone(ctx, "pipe-a", "j1"); err != nil {
			t.Fatal(err)
		}
		if got, again := takeID(t, ctx, st, "pipe-a", "take-0001"); got != "j2" || again {
			t.Fatalf("after j1 was done, take = %q (again %v), want j2, new", got, again)
		}
		if got, again := takeID(t, ctx, st, "pipe-a", "take-0001"); got != "j2" || !again {
			t.Fatalf("retry = %q (again %v), want j2 again", got, again)
		}
		// Rerouted: the job goes back to the head of its queue with the
		// key avoiding its site, and the take_id's next take is a new
		// take, of the next job.
		if _, err := st.Reroute(ctx, "j2", "", "op"); err != nil {
			t.Fatal(err)
		}
		if got, again := takeID(t, ctx, st, "pipe-a", "take-0001"); got != "j3" || again {
			t.Fatalf("after a reroute, take = %q (again %v), want j3, new", got, again)
		}
		// Failed (the reaper's way out for a job nobody knew it held).
		if _, err := st.FailJob(ctx, "j3", "test"); err != nil {
			t.Fatal(err)
		}
		if got, again := takeID(t, ctx, st, "pipe-a", "take-0001"); got != "j4" || again {
			t.Fatalf("after j3 failed, take = %q (again %v), want j4, new", got, again)
		}
		if got := list(t, b, store.KeyPending); !slices.Equal(got, []string{"j5", "j2"}) {
			t.Fatalf("pending = %v, want [j5 j2]", got)
		}
	})
}

// take_ids are bounded: forgotten after TakeIDTTL, and the oldest first
// past the cap; a forgotten take_id takes anew. A take that found no job
// remembers nothing.
func TestTakeIDForgotten(t *testing.T) {
	var now time.Time
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		now = time.Unix(1_800_000_000, 0)
		st.SetTakeIDCapForTest(2)
		addKey(t, ctx, st, "pipe-a")
		if got, _ := takeID(t, ctx, st, "pipe-a", "take-none"); got != "" {
			t.Fatalf("take from an empty queue = %q", got)
		}
		if n := b.Client.HLen(ctx, store.KeyPipelineKeyTakeIDs("pipe-a")).Val(); n != 0 {
			t.Fatalf("a take that found nothing remembered %d take_ids", n)
		}
		for _, id := range []string{"j1", "j2", "j3", "j4", "j5"} {
			queueJob(t, ctx, st, id, "erin", "http://"+id+".example.com/", store.KeyPending)
		}
		takeID(t, ctx, st, "pipe-a", "take-0001") // j1
		now = now.Add(time.Second)
		takeID(t, ctx, st, "pipe-a", "take-0002") // j2
		now = now.Add(time.Second)
		takeID(t, ctx, st, "pipe-a", "take-0003") // j3: take-0001 is forgotten
		for _, k := range []string{store.KeyPipelineKeyTakeIDs("pipe-a"), store.KeyPipelineKeyTakeIDsAt("pipe-a")} {
			if n := b.Client.Exists(ctx, k).Val(); n != 1 {
				t.Fatalf("%s missing", k)
			}
			if ttl := b.Client.TTL(ctx, k).Val(); ttl <= 0 || ttl > store.TakeIDTTL {
				t.Fatalf("%s TTL = %v, want in (0, %v]", k, ttl, store.TakeIDTTL)
			}
		}
		if n := b.Client.ZCard(ctx, store.KeyPipelineKeyTakeIDsAt("pipe-a")).Val(); n != 2 {
			t.Fatalf("remembered %d take_ids, want the cap, 2", n)
		}
		if n := b.Client.HLen(ctx, store.KeyPipelineKeyTakeIDs("pipe-a")).Val(); n != 2 {
			t.Fatalf("remembered %d take_ids' jobs, want the cap, 2", n)
		}
		if got, again := takeID(t, ctx, st, "pipe-a", "take-0003"); got != "j3" || !again {
			t.Fatalf("take-0003 again = %q (again %v), want j3 again", got, again)
		}
		if got, again := takeID(t, ctx, st, "pipe-a", "take-0001"); got != "j4" || again {
			t.Fatalf("take-0001 past the cap = %q (again %v), want j4, new", got, again)
		}
		// Past the TTL (by the store's clock), take-0003 is forgotten.
		now = now.Add(store.TakeIDTTL + time.Second)
		if got, again := takeID(t, ctx, st, "pipe-a", "take-0003"); got != "j5" || again {
			t.Fatalf("take-0003 past the TTL = %q (again %v), want j5, new", got, again)
		}
		if got := held(t, b, "pipe-a"); !slices.Equal(got, []string{"j1", "j2", "j3", "j4", "j5"}) {
			t.Fatalf("pipe-a holds %v", got)
		}
	}, store.WithClock(func() time.Time { return now }))
}

// Retries of one take racing each other (the client gave up on a slow
// answer while the first was still running) take at most one job: the
// check and the take are one script.
func TestTakeIDRacingRetriesTakeOneJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		for _, id := range []string{"j1", "j2", "j3", "j4", "j5", "j6", "j7", "j8", "j9"} {
			queueJob(t, ctx, st, id, "erin", "http://"+id+".org/", store.KeyPending)
		}
		const n = 8
		got := make(chan string, n)
		errs := make(chan error, n)
		for range n {
			go func() {
				j, err := st.APITakeID(ctx, "pipe-a", "ed25519:pipe-a", "take-race-1", []string{store.KeyPending})
				if err != nil || j == nil {
					errs <- fmt.Errorf("take: %v %v", j, err)
					return
				}
				got <- j.Ident
			}()
		}
		for range n {
			select {
			case err := <-errs:
				t.Fatal(err)
			case id := <-got:
				if id != "j1" {
					t.Fatalf("a racing retry took %s, want j1", id)
				}
			}
		}
		if h := held(t, b, "pipe-a"); !slices.Equal(h, []string{"j1"}) {
			t.Fatalf("pipe-a holds %v, want [j1]", h)
		}
		if n := b.Client.LLen(ctx, store.KeyPending).Val(); n != 8 {
			t.Fatalf("%d jobs left in pending, want 8", n)
		}
	})
}
