package coordinator

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// TestQueueIndex: register adds named queues to archivebot:queues; a
// store's first read rebuilds the index with SCAN (queues other programs
// created are found); later reads use the index alone, pruning queues
// pipelines emptied and keys that are not lists.
func TestQueueIndex(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
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
		fresh := store.NewStore(b.Client)
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
		s := store.NewStore(c)
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
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
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
