package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// TestQueueIndex: register adds named queues to archivebot:queues; a
// store's first read rebuilds the index with SCAN (queues other programs
// created are found); later reads use the index alone, pruning queues
// pipelines emptied and keys that are not lists.
func TestQueueIndex(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		for i, q := range []string{"a", "b", "b"} {
			id := fmt.Sprintf("queuedjob%d", i)
			if err := s.Register(ctx, store.NewJob{Ident: id, URL: "http://" + id + ".example/", FetchDepth: "inf",
				Queue: store.KeyPendingNamed(q)}); err != nil {
				t.Fatal(err)
			}
		}
		members := func() []string {
			m, err := b.Client.SMembers(ctx, store.KeyQueues).Result()
			if err != nil {
				t.Fatal(err)
			}
			return slices.Sorted(slices.Values(m))
		}
		if d := cmp.Diff([]string{"pending:a", "pending:b"}, members()); d != "" {
			t.Errorf("index after register (-want +got):\n%s", d)
		}
		b.Client.LPush(ctx, "pending:other", "x")
		b.Client.Set(ctx, "pending:str", "x", 0)
		named := func(s *store.Store) []store.NamedQueue {
			q, err := s.NamedQueueLens(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return q
		}
		fresh := store.New(b.Client)
		want := []store.NamedQueue{{Name: "pending:a", Len: 1}, {Name: "pending:b", Len: 2}, {Name: "pending:other", Len: 1}}
		if d := cmp.Diff(want, named(fresh)); d != "" {
			t.Errorf("first read of a new store (-want +got):\n%s", d)
		}
		// A queue another program creates now is found at the next rebuild.
		b.Client.LPush(ctx, "pending:late", "y")
		if d := cmp.Diff(want, named(fresh)); d != "" {
			t.Errorf("read from the index (-want +got):\n%s", d)
		}
		// A pipeline empties pending:a.
		b.Client.RPop(ctx, "pending:a")
		want = []store.NamedQueue{{Name: "pending:b", Len: 2}, {Name: "pending:late", Len: 1}, {Name: "pending:other", Len: 1}}
		got, err := fresh.RebuildQueueIndex(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("after rebuild (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"pending:b", "pending:late", "pending:other"}, members()); d != "" {
			t.Errorf("index after pruning (-want +got):\n%s", d)
		}
	})
}

// TestStatusRoundTrips: !status costs the same round trips whatever the
// size of the keyspace (it used to SCAN every key for pending:*).
func TestStatusRoundTrips(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		_, err := b.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range 5000 {
				p.Set(ctx, fmt.Sprintf("unrelated%05d", i), "x", 0)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c, n := countingClient(t, b)
		s := store.New(c)
		if _, err := s.Summary(ctx); err != nil {
			t.Fatal(err)
		}
		n.Store(0)
		if _, err := s.Summary(ctx); err != nil {
			t.Fatal(err)
		}
		if got := n.Load(); got != 2 {
			t.Errorf("!status took %d round trips, want 2", got)
		}
	})
}

// A queued job's place: the right end of a queue is its head.
func TestJobDetailPosition(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
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

// TestMove covers every outcome of !move with the state after it.
func TestMove(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		a := svcQueue(t, s, "http://a.example.com/", "alice", "#ab", store.KeyPending)
		bb := svcQueue(t, s, "http://b.example.com/", "alice", "#ab", store.KeyPending)
		c := svcQueue(t, s, "http://c.example.com/", "alice", "#ab", store.KeyPending)
		ao := svcQueue(t, s, "http://ao.example.com/", "alice", "#ab", store.KeyPendingAO)
		queue := func(q string) []string {
			v, _ := b.Client.LRange(ctx, q, 0, -1).Result()
			return v
		}
		// pending is [c b a]: a runs next.
		if from, err := s.Move(ctx, c, store.MoveFront, "op"); err != nil || from != store.KeyPending {
			t.Fatalf("front: %q %v", from, err)
		}
		if diff := cmp.Diff([]string{bb, a, c}, queue(store.KeyPending)); diff != "" {
			t.Errorf("after front (-want +got):\n%s", diff)
		}
		if _, err := s.Move(ctx, c, store.MoveBack, "op"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{c, bb, a}, queue(store.KeyPending)); diff != "" {
			t.Errorf("after back (-want +got):\n%s", diff)
		}
		if _, err := s.Move(ctx, a, store.KeyPendingLarge, "op"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Move(ctx, ao, "pending:fast", "op"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{c, bb}, queue(store.KeyPending)); diff != "" {
			t.Errorf("pending (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{a}, queue(store.KeyPendingLarge)); diff != "" {
			t.Errorf("pending-large (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{ao}, queue("pending:fast")); diff != "" {
			t.Errorf("pending:fast (-want +got):\n%s", diff)
		}
		if q, _ := b.Client.HGet(ctx, store.KeyOrigin(a), "queue").Result(); q != store.KeyPendingLarge {
			t.Errorf("origin queue of a: %q", q)
		}
		if ok, _ := b.Client.SIsMember(ctx, store.KeyQueues, "pending:fast").Result(); !ok {
			t.Errorf("pending:fast not in the queue index")
		}
		es, _ := s.History(ctx, a, 1)
		if len(es) != 1 || es[0].Event != store.EventMoved || es[0].Detail["from"] != store.KeyPending || es[0].Detail["to"] != store.KeyPendingLarge || es[0].By != "op" {
			t.Errorf("history entry of the move: %+v", es)
		}
		before, _ := redistest.Dump(ctx, b.Client)
		// Refusals write nothing.
		defer func() {
			if t.Failed() {
				t.Log(before)
			}
		}()
		for _, tc := range []struct {
			id, where string
			want      error
		}{
			{bb, store.KeyPendingAO, store.ErrWrongQueueKind},
			{ao, store.KeyPending, store.ErrWrongQueueKind},
			{bb, store.KeyPending, store.ErrSameQueue},
			{"nosuchjob", store.MoveFront, store.ErrNoJob},
		} {
			if _, err := s.Move(ctx, tc.id, tc.where, "op"); !errors.Is(err, tc.want) {
				t.Errorf("move %s to %s: %v, want %v", tc.id, tc.where, err, tc.want)
			}
		}
		if mid, _ := redistest.Dump(ctx, b.Client); !cmp.Equal(before, mid) {
			t.Errorf("refused moves changed Redis:\n%s", cmp.Diff(before, mid))
		}
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"})
		j, _ := p.Take(ctx) // takes a (pending-large is not checked: not large) or the next of pending
		if j == nil {
			t.Fatal("nothing taken")
		}
		writesNothing(t, b, "refused move changed Redis", func() {
			if _, err := s.Move(ctx, j.Ident, store.MoveFront, "op"); !errors.Is(err, store.ErrJobStarted) {
				t.Errorf("move of a running job: %v", err)
			}
		})
	})
}

// TestPerUserPendingLimit: a nick may have at most the limit of jobs
// queued; jobs a pipeline took no longer count; the refusal writes nothing
// and says how many are queued.
func TestPerUserPendingLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		reg := func(url, key string) error {
			norm, id := identOfURL(t, url)
			return s.Register(ctx, store.NewJob{Ident: id, URL: norm, FetchDepth: "inf", StartedBy: "Nick[1]", NickKey: key,
				Queue: store.KeyPending, PerUserLimit: 2})
		}
		if err := reg("http://u1.example.com/", "nick{1}"); err != nil {
			t.Fatal(err)
		}
		if err := reg("http://u2.example.com/", "nick{1}"); err != nil {
			t.Fatal(err)
		}
		writesNothing(t, b, "refusal wrote", func() {
			var le *store.UserLimitError
			if err := reg("http://u3.example.com/", "nick{1}"); !errors.As(err, &le) || le.Queued != 2 {
				t.Fatalf("third job: %v", err)
			}
		})
		if _, err := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"}).Take(ctx); err != nil {
			t.Fatal(err)
		}
		if err := reg("http://u3.example.com/", "nick{1}"); err != nil {
			t.Fatalf("after a start: %v", err)
		}
	})
}
