package embeddedredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/embeddedredis"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// The upstream pipeline's own Lua scripts (report, take, log, abort, mark
// done — doc/protocol.md, What a pipeline does; run by the simulator exactly as a pipeline runs them)
// work on the embedded server, and a job marked done there expires after
// its TTL, across a restart too, so its URL can be archived again.
func TestPipelineScriptsOnEmbedded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := embeddedredis.Start(embeddedredis.Options{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	st := store.New(rdb)
	register := func(id, url string) {
		t.Helper()
		err := st.Register(ctx, store.NewJob{Ident: id, URL: url, FetchDepth: "inf", Slug: "x-inf",
			StartedBy: "alice", StartedIn: "#a", DelayMin: 250, DelayMax: 375, Concurrency: 3,
			SettingsAge: 4, Queue: store.KeyPending})
		if err != nil {
			t.Fatal(err)
		}
	}
	register("done1", "http://done.example/")
	register("abort1", "http://abort.example/")

	p := pipelinesim.New(rdb, pipelinesim.Config{Nickname: "sim"})
	if err := p.Report(ctx, "Running"); err != nil {
		t.Fatal(err)
	}
	// The right end of the queue is the head: done1 was queued first.
	j, err := p.Take(ctx)
	if err != nil || j == nil || j.Ident != "done1" {
		t.Fatalf("take: %v %v", j, err)
	}
	if err := j.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{200, 404, 500} {
		if _, err := j.LogDownload(ctx, "http://done.example/x", code); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Done(ctx); err != nil {
		t.Fatal(err)
	}
	ttl, _ := rdb.TTL(ctx, "done1").Result()
	if ttl < 47*time.Hour || ttl > 48*time.Hour {
		t.Fatalf("completed job TTL %v, want 48h", ttl)
	}

	a, err := p.Take(ctx)
	if err != nil || a == nil || a.Ident != "abort1" {
		t.Fatalf("take: %v %v", a, err)
	}
	if err := a.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Done(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.LLen(ctx, store.KeyFinishNotifications).Result(); n != 2 {
		t.Fatalf("finish notifications: %d", n)
	}
	for k, want := range map[string]string{"jobs_completed": "1", "jobs_aborted": "1"} {
		if v, _ := rdb.Get(ctx, k).Result(); v != want {
			t.Fatalf("%s = %q, want %q", k, v, want)
		}
	}
	// The aborted job's 5 s run out in real time.
	testproc.Eventually(t, "the aborted job to expire in real time", func() bool {
		n, _ := rdb.Exists(ctx, "abort1", "abort1_log").Result()
		return n == 0
	})

	// Restart: the completed job comes back with its timer running.
	rdb.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err = embeddedredis.Start(embeddedredis.Options{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	ttl, _ = rdb.TTL(ctx, "done1").Result()
	if ttl < 47*time.Hour {
		t.Fatalf("after restart TTL %v", ttl)
	}
	srv.Miniredis().FastForward(48 * time.Hour)
	if n, _ := rdb.Exists(ctx, "done1", "done1_log", "done1_ignores").Result(); n != 0 {
		t.Fatalf("%d keys of the completed job survive its 48 h", n)
	}
	// Its URL can be archived again.
	st = store.New(rdb)
	register("done1", "http://done.example/")
}
