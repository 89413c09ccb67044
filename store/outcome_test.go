package store_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// Every write of a user command records its outcome in
// the same script as the change. Run again under the same command id (as
// the bot does when a reply was lost), it returns the recorded result and
// changes nothing; refusals write no record.
func TestOutcomeRecord(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		under := func(id string) context.Context { return store.WithCommand(ctx, id, time.Minute) }
		record := func(id string) string {
			t.Helper()
			v, err := b.Client.Get(ctx, store.KeyCommand(id)).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			return v
		}

		// Register: a resend under the same id is "created", once.
		for i := 0; i < 2; i++ {
			if err := s.Register(under("reg1"), newJob("job1")); err != nil {
				t.Fatalf("register, send %d: %v", i+1, err)
			}
		}
		if n, _ := b.Client.LLen(ctx, store.KeyPending).Result(); n != 1 {
			t.Fatalf("pending holds %d entries, want 1", n)
		}
		if record("reg1") != "[1,0]" {
			t.Fatalf("register record %q", record("reg1"))
		}
		if ttl, _ := b.Client.TTL(ctx, store.KeyCommand("reg1")).Result(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("record TTL %v, want at most a minute", ttl)
		}
		// Another command for the same URL learns it exists, and records
		// nothing (it changed nothing).
		if err := s.Register(under("reg2"), newJob("job1")); !errors.Is(err, store.ErrJobExists) {
			t.Fatalf("second command: %v", err)
		}
		if record("reg2") != "" {
			t.Fatalf("refusal wrote a record %q", record("reg2"))
		}
		// Without a command id nothing is recorded (services, tests).
		if err := s.Register(ctx, newJob("job2")); err != nil {
			t.Fatal(err)
		}

		// Settings: one bump however often the command is sent.
		ch := store.Change{Bump: 1, AddPatterns: []string{"p"}}
		for i := 0; i < 3; i++ {
			age, err := s.ChangeSettings(under("set1"), "job1", ch)
			if err != nil || age != 5 {
				t.Fatalf("settings, send %d: age %d, %v", i+1, age, err)
			}
		}
		if age, _ := b.Client.HGet(ctx, "job1", "settings_age").Result(); age != "5" {
			t.Fatalf("settings_age %s, want 5", age)
		}
		if _, err := s.ChangeSettings(under("set2"), "nosuchjob", ch); !errors.Is(err, store.ErrNoJob) {
			t.Fatalf("settings of a missing job: %v", err)
		}
		if record("set2") != "" {
			t.Fatal("refused settings change wrote a record")
		}

		// Abort of a queued job: finished once, one notification.
		for i := 0; i < 2; i++ {
			res, url, err := s.Abort(under("abort1"), "job1")
			if err != nil || res != store.AbortedQueued || url != "http://example.com/" {
				t.Fatalf("abort, send %d: %v %q %v", i+1, res, url, err)
			}
		}
		if n, _ := b.Client.LLen(ctx, store.KeyFinishNotifications).Result(); n != 1 {
			t.Fatalf("%d finish notifications, want 1", n)
		}
		if v, _ := b.Client.Get(ctx, store.KeyJobsAborted).Result(); v != "1" {
			t.Fatalf("jobs_aborted %s", v)
		}
		// A different command sees the job finished.
		if _, _, err := s.Abort(under("abort2"), "job1"); !errors.Is(err, store.ErrJobFinished) {
			t.Fatalf("second abort: %v", err)
		}

		// Fail: counted once, the record after the change both times.
		for i := 0; i < 2; i++ {
			job, err := s.FailJob(under("fail1"), "job2", "failed by carol")
			if err != nil || job.Get("failed_reason") != "failed by carol" {
				t.Fatalf("fail, send %d: %v %v", i+1, job, err)
			}
		}
		if v, _ := b.Client.Get(ctx, store.KeyJobsFailed).Result(); v != "1" {
			t.Fatalf("jobs_failed %s", v)
		}

		// Expire: the second send does not say "no such job".
		for i := 0; i < 2; i++ {
			if err := s.Expire(under("exp1"), "job2"); err != nil {
				t.Fatalf("expire, send %d: %v", i+1, err)
			}
		}
	})
}

// A write that could not be sent (connection refused) is "unavailable":
// nothing happened. A write sent to a server that never answers has an
// unknown outcome.
func TestWriteFailureClassified(t *testing.T) {
	ctx := context.Background()
	b := redistest.Mini(t)
	addr := b.Mini.Addr()
	b.Mini.Close()
	refused := store.New(redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1}))
	err := refused.Register(ctx, newJob("job1"))
	if !store.IsUnavailable(err) || store.IsOutcomeUnknown(err) {
		t.Fatalf("refused connection: %v (unavailable %v, unknown %v)", err,
			store.IsUnavailable(err), store.IsOutcomeUnknown(err))
	}

	// A server that reads everything and never answers.
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Silent(t), ReadTimeout: 100 * time.Millisecond, Protocol: 2})
	defer rdb.Close()
	silent := store.New(rdb)
	for name, run := range map[string]func() error{
		"register": func() error { return silent.Register(ctx, newJob("job1")) },
		"settings": func() error { _, err := silent.ChangeSettings(ctx, "job1", store.Change{Bump: 1}); return err },
		"expire":   func() error { return silent.Expire(ctx, "job1") },
	} {
		if err := run(); !store.IsOutcomeUnknown(err) || !store.IsUnavailable(err) {
			t.Errorf("%s with a silent server: %v, want an unknown outcome", name, err)
		}
	}
}

// BenchmarkCommandRecord measures what the outcome record costs a command:
// a settings change with and without a command id.
func BenchmarkCommandRecord(b *testing.B) {
	for _, be := range redistest.All(b) {
		for _, withID := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/record=%v", be.Name, withID), func(b *testing.B) {
				ctx := context.Background()
				s := store.New(be.Client)
				if err := s.Register(ctx, newJob("benchjob")); err != nil && !errors.Is(err, store.ErrJobExists) {
					b.Fatal(err)
				}
				ch := store.Change{Bump: 1, Set: map[string]string{"delay_min": "1"}}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					cctx := ctx
					if withID {
						cctx = store.WithCommand(ctx, strconv.Itoa(i), time.Minute)
					}
					if _, err := s.ChangeSettings(cctx, "benchjob", ch); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// With redis.wait_replicas set, a command's write that no
// replica confirmed is not acknowledged: its outcome is unknown (the bot
// says so and follows up), and a resend under the same command id finds
// the record and waits again, changing nothing. (Neither backend here has
// a replica; the Sentinel process test covers the replicated case.)
func TestWaitReplicasNotConfirmed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := store.WithCommand(context.Background(), "w1", time.Minute)
		s := store.New(b.Client, store.WithWait(1, 10*time.Millisecond))
		for i := 0; i < 2; i++ {
			err := s.Register(ctx, newJob("waitjob"))
			if !store.IsOutcomeUnknown(err) || !errors.Is(err, store.ErrNotReplicated) {
				t.Fatalf("send %d: err = %v; want outcome unknown, not replicated", i+1, err)
			}
		}
		if n := b.Client.LLen(context.Background(), store.KeyPending).Val(); n != 1 {
			t.Fatalf("pending has %d entries; want the job once", n)
		}
		if err := store.New(b.Client).Register(ctx, newJob("waitjob")); err != nil {
			t.Fatalf("resend without WAIT: %v; want the recorded success", err)
		}
	})
}

// BenchmarkRegisterWait measures what WAIT 1 (redis.wait_replicas = 1)
// adds to a command's write: Register through the Sentinel client on a
// master with two replicas on loopback, without and with WAIT.
//
//	go test ./store/ -run '^$' -bench RegisterWait -benchtime 2000x
func BenchmarkRegisterWait(b *testing.B) {
	cl := redistest.StartCluster(b)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: cl.SentinelAddrs()})
	defer rdb.Close()
	for _, wait := range []int{0, 1, 2, -1} {
		name := fmt.Sprintf("wait_replicas=%d", wait)
		opts := []store.Option{store.WithWait(wait, time.Second)}
		if wait < 0 {
			// With the failover check's positions: INFO replication in
			// the write's round trip (store/replpos.go).
			name = "wait_replicas=1,positions"
			opts = []store.Option{store.WithWait(1, time.Second), store.WithPositions(store.NewPositions())}
		}
		b.Run(name, func(b *testing.B) {
			s := store.New(rdb, opts...)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("benchwait%d-%d", wait, i)
				j := newJob(id)
				if err := s.Register(store.WithCommand(ctx, id, time.Minute), j); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
