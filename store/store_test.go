package store_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// countHook counts the round trips a client makes: one per command sent
// alone, one per pipeline.
type countHook struct{ trips, cmds atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func newJob(id string) store.NewJob {
	return store.NewJob{
		Ident: id, URL: "http://example.com/", FetchDepth: "inf", Slug: "example.com-inf",
		StartedBy: "alice", StartedIn: "#archivebot", DelayMin: 250, DelayMax: 375,
		Concurrency: 3, SettingsAge: 4, Patterns: []string{"a", "b"}, Queue: store.KeyPending,
	}
}

// Registration is one script call: one round trip, so there is no point
// between writing the record and queueing it where a crash could stop it.
func TestRegisterIsOneRoundTrip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		// Load the script first so the count shows the steady state
		// (EVALSHA), not the one-time NOSCRIPT fallback.
		if err := st.Register(ctx, newJob("warmup")); err != nil {
			t.Fatal(err)
		}
		h := &countHook{}
		b.Client.AddHook(h)
		if err := st.Register(ctx, newJob("job1")); err != nil {
			t.Fatal(err)
		}
		if h.trips.Load() != 1 || h.cmds.Load() != 1 {
			t.Fatalf("register took %d round trips, %d commands; want 1, 1", h.trips.Load(), h.cmds.Load())
		}
		q, _ := b.Client.LRange(ctx, store.KeyPending, 0, -1).Result()
		if len(q) != 2 || q[0] != "job1" {
			t.Fatalf("pending = %v", q)
		}
		if err := st.Register(ctx, newJob("job1")); !errors.Is(err, store.ErrJobExists) {
			t.Fatalf("second register: %v, want ErrJobExists", err)
		}
	})
}

// A command failing inside the script must not leave a record without its
// queue entry: the script checks every key's type before the first write.
func TestRegisterFailureWritesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		b.Client.Set(ctx, "pending-ao", "not a list", 0)
		j := newJob("job2")
		j.Queue = "pending-ao"
		if err := st.Register(ctx, j); err == nil {
			t.Fatal("register into a wrong-typed queue succeeded")
		}
		if n, _ := b.Client.Exists(ctx, "job2", "job2_ignores").Result(); n != 0 {
			t.Fatalf("a failed registration left %d keys behind", n)
		}
	})
}

func TestRegisterPendingLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		for _, id := range []string{"a1", "a2"} {
			j := newJob(id)
			j.PendingLimit = 2
			if err := st.Register(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		j := newJob("a3")
		j.PendingLimit = 2
		if err := st.Register(ctx, j); !errors.Is(err, store.ErrPendingFull) {
			t.Fatalf("third job: %v, want ErrPendingFull", err)
		}
		if n, _ := b.Client.Exists(ctx, "a3").Result(); n != 0 {
			t.Fatal("refused job was written")
		}
		// An existing job is reported as existing even when the queue is full.
		j = newJob("a1")
		j.PendingLimit = 2
		if err := st.Register(ctx, j); !errors.Is(err, store.ErrJobExists) {
			t.Fatalf("existing job with full queue: %v, want ErrJobExists", err)
		}
	})
}

func TestUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	st := store.New(c)
	_, err = st.GetJob(context.Background(), "x")
	if !store.IsUnavailable(err) {
		t.Fatalf("error %v is not classified as unavailable", err)
	}
	err = st.Register(context.Background(), newJob("x"))
	if !store.IsUnavailable(err) {
		t.Fatalf("error %v is not classified as unavailable", err)
	}
}

// BenchmarkRegister measures one !a registration: ns/op and Redis round
// trips per registration (goal: 1).
func BenchmarkRegister(b *testing.B) {
	run := func(b *testing.B, be *redistest.Backend) {
		ctx := context.Background()
		st := store.New(be.Client)
		if err := st.Register(ctx, newJob("warm")); err != nil {
			b.Fatal(err)
		}
		h := &countHook{}
		be.Client.AddHook(h)
		ids := make([]string, b.N)
		for i := range ids {
			ids[i] = "bench" + strconv.Itoa(i)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := st.Register(ctx, newJob(ids[i])); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(h.trips.Load())/float64(b.N), "roundtrips/op")
	}
	b.Run("miniredis", func(b *testing.B) { run(b, redistest.Mini(b)) })
	b.Run("redis", func(b *testing.B) {
		be := redistest.RealRedis(b)
		if be == nil {
			b.Skip("ARCHIVEBOT_TEST_REDIS not set")
		}
		run(b, be)
	})
}
