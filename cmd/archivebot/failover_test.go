package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// TestFailoverLosingWritesIsNoticed: a Sentinel failover promotes a
// replica that lacks a write WAIT confirmed (the other replica confirmed
// it) and a take answered to an API pipeline. The node's failover check
// sees the new master is short of them: it logs it, counts it, and the
// pipeline holding the job Redis forgot is told at once (a released
// event on its control stream, before it writes anything), while a hold
// the new master has is kept; it says it once in the admin channel, not
// while it does not lead (a follower never writes), at once when it
// does.
//
// The promotion: replica 1's link to the master is cut (a wrong
// masterauth, so it cannot resync) while replica 0 confirms the writes;
// then the master and replica 0 are killed, and the sentinels can only
// promote replica 1.
func TestFailoverLosingWritesIsNoticed(t *testing.T) {
	// Parallel (with the other tests that wait on their own servers and
	// child processes, e2e_process_test.go): its Redis is a cluster of its
	// own, not the process's real-Redis database; the counters it reads
	// move only in its own pipeline API here (the other parallel tests run
	// their nodes as children, and sequential tests end before it runs).
	t.Parallel()
	cl := redistest.StartCluster(t)
	lostBefore := counter("archivebot_redis_master_changes_total", "verdict", "lost")
	takesBefore := counter("archivebot_redis_lost_takes_total", "", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: cl.SentinelAddrs(),
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer rdb.Close()
	st := store.New(rdb, store.WithWait(1, 2*time.Second), store.WithPositions(store.NewPositions()))
	var logs testproc.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	defer func() {
		if t.Failed() {
			t.Logf("the node's log:\n%s", logs.String())
		}
	}()

	papi := pipelineapi.New(pipelineapi.Options{Store: st, Logger: logger, KeyRefresh: 50 * time.Millisecond, FlushInterval: 50 * time.Millisecond})
	hs := httptest.NewServer(papi.Handler())
	defer hs.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); papi.Run(ctx) }()
	pub, priv, _ := ed25519.GenerateKey(nil)
	if err := st.AddPipelineKey(ctx, "alpha", wire.FormatPublicKey(pub)); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(hs.URL, "alpha", priv)
	if err != nil {
		t.Fatal(err)
	}
	// The pipeline's control stream: what the node tells it.
	var evMu sync.Mutex
	var released []wire.Released
	settings := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			err := c.Control(ctx, func(ev client.Event) error {
				if s, err := ev.Settings(); ev.Name == wire.EventSettings && err == nil {
					evMu.Lock()
					settings[s.Ident] = true
					evMu.Unlock()
				}
				if ev.Name == wire.EventReleased {
					var r wire.Released
					json.Unmarshal(ev.Data, &r)
					evMu.Lock()
					released = append(released, r)
					evMu.Unlock()
				}
				return nil
			})
			logger.Info("test: the control stream ended", "err", err)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	streamed := func(ident string) bool {
		evMu.Lock()
		defer evMu.Unlock()
		return settings[ident]
	}
	releasedOf := func(ident string) []wire.Released {
		evMu.Lock()
		defer evMu.Unlock()
		var out []wire.Released
		for _, r := range released {
			if r.Ident == ident {
				out = append(out, r)
			}
		}
		return out
	}

	// The leader's check, counting its cycles.
	fc := coordinator.NewFailoverCheck(st, st.Positions(), papi, logger)
	// The node does not lead when it notices (a failover can move the
	// leadership too): it says it in the channel once it leads.
	var leading atomic.Bool
	fc.Leading = leading.Load
	var cycleMu sync.Mutex
	n := 0
	runCheck := func() {
		if err := fc.Check(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("check", "err", err)
		}
		cycleMu.Lock()
		n++
		cycleMu.Unlock()
	}
	cyclesRun := func() int { cycleMu.Lock(); defer cycleMu.Unlock(); return n }
	runCheck() // it knows the first master
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			runCheck()
			time.Sleep(200 * time.Millisecond)
		}
	}()

	register := func(ident string) {
		t.Helper()
		err := st.Register(store.WithCommand(ctx, ident, time.Minute), store.NewJob{Ident: ident, URL: "http://example.com/" + ident,
			FetchDepth: "inf", Slug: "example.com-inf", StartedBy: "nick", StartedIn: "#chan", DelayMin: 250, DelayMax: 375,
			Concurrency: 3, Queue: store.KeyPending})
		if err != nil {
			t.Fatalf("register %s: %v", ident, err)
		}
	}
	take := func(want string) {
		t.Helper()
		var j *wire.Job
		var err error
		// The node reads new keys every 50 ms: the first take may come
		// before it knows the key.
		testproc.Eventually(t, "a take answered", func() bool {
			j, err = c.Take(ctx, wire.TakeRequest{})
			return !client.IsCode(err, "unknown_key")
		})
		if err != nil || j == nil || j.Ident != want {
			t.Fatalf("take: %+v %v, want %s", j, err, want)
		}
	}
	register("early")
	register("late")
	take("early") // a hold every replica has

	// Cut replica 1 off: it answers, but cannot resync.
	r1 := redis.NewClient(&redis.Options{Addr: cl.Replicas[1].Addr()})
	defer r1.Close()
	if err := r1.ConfigSet(ctx, "masterauth", "not-the-password").Err(); err != nil {
		t.Fatal(err)
	}
	if err := r1.ClientKillByFilter(ctx, "TYPE", "master").Err(); err != nil {
		t.Fatal(err)
	}
	testproc.Eventually(t, "replica 1's link down", func() bool {
		info, _ := r1.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:down")
	})
	take("late")          // answered, never reaches replica 1
	register("confirmed") // WAIT 1: confirmed by replica 0
	// The pipeline's control stream is open: it had late's settings.
	testproc.Eventually(t, "the control stream to send late's settings", func() bool { return streamed("late") })
	cl.Master.Kill()
	cl.Replicas[0].Kill()
	if err := r1.ConfigSet(ctx, "masterauth", "").Err(); err != nil {
		t.Fatal(err)
	}
	testproc.EventuallyWithin(t, 60*time.Second, "the sentinels to promote replica 1", func() bool {
		a, _ := cl.MasterAddr(ctx)
		return a == cl.Replicas[1].Addr()
	})

	// The pipeline is told at once, without writing anything.
	testproc.EventuallyWithin(t, 30*time.Second, "the pipeline told to let go of the job whose take was lost", func() bool {
		return len(releasedOf("late")) > 0
	})
	if r := releasedOf("late")[0]; !strings.HasPrefix(r.Reason, wire.ReleasedLost) {
		t.Errorf("released late for %q, want the reason to start %q", r.Reason, wire.ReleasedLost)
	}
	// Not leading: nothing said yet, five cycles on.
	after := cyclesRun()
	testproc.Eventually(t, "five more cycles of the check", func() bool { return cyclesRun() >= after+5 })
	if n, _ := rdb.LLen(ctx, store.KeyAdminNotices).Result(); n != 0 {
		t.Errorf("a node that does not lead queued %d admin notices; a follower never writes", n)
	}
	leading.Store(true)
	// Five more cycles of the check: one notice, the kept hold kept.
	after = cyclesRun()
	testproc.Eventually(t, "five more cycles of the check", func() bool { return cyclesRun() >= after+5 })
	if r := releasedOf("early"); len(r) != 0 {
		t.Errorf("early's hold, which the new master has, was released: %+v", r)
	}
	docs, err := rdb.LRange(ctx, store.KeyAdminNotices, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || !strings.Contains(docs[0], coordinator.LostNoticePrefix) || !strings.Contains(docs[0], "late") ||
		!strings.Contains(docs[0], "last confirmed write") || !strings.Contains(docs[0], "by a node that did not lead then") {
		t.Errorf("admin notices %q, want one saying the new master lacks the last confirmed write and the take of late", docs)
	}
	out := logs.String()
	for _, want := range []string{`level=ERROR msg="a Redis failover lost writes this node acknowledged: the new master lacks them"`,
		`level=ERROR msg="a Redis failover lost this take`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
	if got := counter("archivebot_redis_master_changes_total", "verdict", "lost") - lostBefore; got != 1 {
		t.Errorf("archivebot_redis_master_changes_total{verdict=lost} rose by %v, want 1", got)
	}
	if got := counter("archivebot_redis_lost_takes_total", "", "") - takesBefore; got != 1 {
		t.Errorf("archivebot_redis_lost_takes_total rose by %v, want 1", got)
	}
}

// counter reads a counter of the metrics registry (label "" for none).
func counter(name, label, value string) float64 {
	mfs, _ := metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := label == ""
			for _, p := range m.GetLabel() {
				if p.GetName() == label && p.GetValue() == value {
					ok = true
				}
			}
			if ok {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
