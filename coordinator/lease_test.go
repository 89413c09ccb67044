package coordinator_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

// The lease manager runs lead while it holds the lease, with the
// fencing token in its context; it cancels that context as soon as a
// renewal finds another holder, and releases the lease at shutdown so a
// standby takes it at once.
func TestLeaseManager(t *testing.T) {
	b := redistest.Mini(t)
	s := store.New(b.Client)
	ttl := 600 * time.Millisecond
	type term struct {
		node string
		ctx  context.Context
	}
	terms := make(chan term, 10)
	lead := func(node string) func(ctx context.Context) {
		return func(ctx context.Context) {
			terms <- term{node, ctx}
			<-ctx.Done()
		}
	}
	a := coordinator.NewLease(s, "a", ttl, nil)
	ctxA, stopA := context.WithCancel(context.Background())
	doneA := make(chan struct{})
	go func() { defer close(doneA); a.Run(ctxA, lead("a")) }()
	first := recvTerm(t, terms)
	if first.node != "a" || !a.Valid() {
		t.Fatalf("first term: %s, valid=%v", first.node, a.Valid())
	}
	bn := coordinator.NewLease(s, "b", ttl, nil)
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneB := make(chan struct{})
	go func() { defer close(doneB); bn.Run(ctxB, lead("b")) }()

	// Another holder (as after a pause past the TTL): a steps down.
	if err := b.Client.Set(context.Background(), store.KeyLeader, "999 intruder 0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	<-first.ctx.Done()
	if a.Valid() {
		t.Fatal("a still counts itself leader after losing the lease")
	}
	if _, _, err := s.TakeNotice(context.WithoutCancel(first.ctx), store.FinishQueue); !store.IsFenced(err) {
		t.Fatalf("a's term context still writes: %v", err)
	}
	// The intruder goes away: someone takes over.
	b.Client.Del(context.Background(), store.KeyLeader)
	next := recvTerm(t, terms)
	// Shut the holder down: it releases, the other one takes over.
	if next.node == "a" {
		stopA()
		<-doneA
	} else {
		stopB()
		<-doneB
	}
	last := recvTerm(t, terms)
	if last.node == next.node {
		t.Fatalf("after %s shut down, %s led again", next.node, last.node)
	}
	stopA()
	stopB()
	<-doneA
	<-doneB
	if _, ok, _ := s.Leader(context.Background()); ok {
		t.Fatal("the lease is still held after both nodes shut down")
	}
}

func recvTerm[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no leadership term began")
		panic("unreachable")
	}
}

// A node whose clock is further than
// MaxClockSkew from Redis's TIME does not campaign, and says why; once
// its clock agrees it leads.
func TestLeaseRefusesSkewedClock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		var skew atomic.Int64
		skew.Store(int64(30 * time.Second))
		s := store.New(b.Client, store.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
		l := coordinator.NewLease(s, "skewed", 600*time.Millisecond, nil)
		l.MaxClockSkew = 5 * time.Second
		led := make(chan struct{}, 1)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Run(ctx, func(ctx context.Context) {
				led <- struct{}{}
				<-ctx.Done()
			})
		}()
		defer func() { stop(); <-done }()
		testproc.Eventually(t, "the clock problem said", func() bool { return strings.Contains(l.ClockProblem(), "30s") })
		select {
		case <-led:
			t.Fatal("a node whose clock is 30 s off took the lease")
		default:
		}
		if n, _ := b.Client.Exists(context.Background(), store.KeyLeader).Result(); n != 0 {
			t.Fatal("a node whose clock is 30 s off holds the lease key")
		}
		skew.Store(0)
		testproc.Eventually(t, "leading once the clock agrees", func() bool { return len(led) == 1 })
		if l.ClockProblem() != "" {
			t.Errorf("clock problem still said: %q", l.ClockProblem())
		}
	})
}

// slowTime delays the answers to TIME by d, after Redis read its clock:
// a slow round trip (a busy Redis or network).
type slowTime struct{ d time.Duration }

func (h slowTime) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowTime) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h slowTime) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "time" {
			time.Sleep(h.d)
		}
		return err
	}
}

// A slow TIME round trip is not a skewed clock: the offset is known only
// within half the round trip, and a node whose clock agrees keeps
// leading however slow the answer (here 4 × ha.max_clock_skew, as 12 s
// against the default 5 s would be). The old check took rtt/2 as skew and
// made the leader step down.
func TestLeaseSlowTimeIsNotSkew(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := redis.NewClient(b.Client.Options())
		defer c.Close()
		c.AddHook(slowTime{d: 200 * time.Millisecond})
		s := store.New(c)
		l := coordinator.NewLease(s, "slow", 2*time.Second, nil)
		l.MaxClockSkew = 50 * time.Millisecond
		led := make(chan struct{}, 1)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Run(ctx, func(ctx context.Context) {
				led <- struct{}{}
				<-ctx.Done()
			})
		}()
		defer func() { stop(); <-done }()
		testproc.Eventually(t, "leading or a clock problem", func() bool { return len(led) == 1 || l.ClockProblem() != "" })
		if p := l.ClockProblem(); p != "" {
			t.Fatalf("a slow TIME answer taken for a skewed clock: %s", p)
		}
	})
}
